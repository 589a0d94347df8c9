package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// leaks says which form of value s shows: the value, its base64, or any
// prefix (6+ hex) of its unsalted SHA-256, which would let a reader
// confirm a guessed password offline.
func leaks(s, value string) string {
	if deploytest.Shows(s, value) {
		return "the value"
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	if strings.Contains(s, strings.TrimRight(b64, "=")) {
		return "its base64"
	}
	sum := sha256.Sum256([]byte(value))
	if strings.Contains(s, hex.EncodeToString(sum[:])[:6]) {
		return "a prefix of its sha256"
	}
	return ""
}

// Every command but render, in every output format, with a Secret value
// known to the test: the value never shows, plain, base64 or hashed.
func TestNoSecretValueInAnyOutput(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `secret: "pw-0"`)
	changed := deploytest.Values(t, `secret: "pw-1"`, `name: "renamed"`)
	kc := "--kubeconfig=" + env.Kubeconfig
	steps := [][]string{
		{"diff", dir, "-o", "text"}, {"diff", dir, "-o", "json"}, {"diff", dir, "-o", "markdown"},
		{"apply", "--no-wait", dir, "--dry-run", "-o", "json"}, {"apply", "--no-wait", dir, "--dry-run"},
		{"apply", "--no-wait", dir, "-o", "json"},
		{"diff", dir, "-f", changed, "-o", "text"}, {"diff", dir, "-f", changed, "-o", "json"}, {"diff", dir, "-f", changed, "-o", "markdown"},
		{"apply", "--no-wait", dir, "-f", changed, "--no-prune", "-o", "json"},
		{"prune", dir, "-f", changed, "--dry-run", "-o", "json"}, {"prune", dir, "-f", changed, "--dry-run"},
		{"status", dir, "-o", "table"}, {"status", dir, "-o", "json"}, {"status", dir, "-o", "yaml"},
		{"apply", "--no-wait", dir, "-o", "text"},
		{"prune", dir, "-o", "json"},
		{"delete", dir, "--dry-run", "-o", "json"}, {"delete", dir, "-o", "text"},
	}
	for _, args := range steps {
		code, out, errOut := runOpm(t, append(args, kc)...)
		assert.Assert(t, code == 0 || (args[0] == "status" && code == 1) || (args[0] == "diff" && code == 1), "%v: %d\n%s", args, code, errOut)
		for _, v := range []string{"pw-0", "pw-1"} {
			if what := leaks(out+errOut, v); what != "" {
				t.Errorf("opm %s shows %s of the Secret value %q:\n%s%s", strings.Join(args, " "), what, v, out, errOut)
			}
		}
	}
}

// A deployment directory with a SOPS-encrypted values file in git, applied
// and reviewed with the key from SOPS_AGE_KEY as in CI: no command, in no
// output format, shows a decrypted value, its base64 or its hash — render
// aside, which prints the manifests for the operator as `sops -d` would.
func TestSopsValuesNeverShow(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.SopsDir(t, ns, "")
	gitRepo(t, dir, "encrypted values")
	t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
	// The pull request: the encrypted file is replaced by one with new values.
	headValues := deploytest.SopsValues(t, "secret: \"0042\"\nconfig: {api-token: tok-new-2b7c91}\n")
	kc := "--kubeconfig=" + env.Kubeconfig
	prod := []string{"--env", "production", kc}
	steps := [][]string{
		{"render", dir, "--env", "production", "-o", "json"},
		{"diff", dir, "-o", "text"}, {"diff", dir, "-o", "json"}, {"diff", dir, "-o", "markdown"},
		{"apply", "--no-wait", dir, "--dry-run", "-o", "json"}, {"apply", "--no-wait", dir, "--dry-run"},
		{"apply", "--no-wait", dir, "-o", "json"}, {"apply", "--no-wait", dir},
		{"diff", dir, "-f", headValues, "-o", "text"}, {"diff", dir, "-f", headValues, "-o", "markdown"},
		{"review", dir, "--base", "main", "-f", headValues, "-o", "markdown"},
		{"review", dir, "--base", "main", "-f", headValues, "-o", "json"},
		{"review", dir, "--base", "main", "-f", headValues, "-o", "text"},
		{"status", dir, "-o", "json"}, {"history", "app", dir, "-o", "json"},
	}
	for _, args := range steps {
		switch args[0] {
		case "render":
		case "review": // no cluster
			args = append(args, "--env", "production")
		default:
			args = append(args, prod...)
		}
		code, out, errOut := runOpm(t, args...)
		assert.Assert(t, code == 0 || code == 1, "%v: %d\n%s", args, code, errOut)
		if args[0] == "render" {
			// Values and valuesText mask; the manifests are the operator's.
			var res struct {
				Releases []struct {
					Values     json.RawMessage
					ValuesText string
				}
			}
			assert.NilError(t, json.Unmarshal([]byte(out), &res))
			out = string(res.Releases[0].Values) + res.Releases[0].ValuesText
		}
		for _, v := range []string{deploytest.SopsPIN, deploytest.SopsToken, "0042", "tok-new-2b7c91"} {
			if what := leaks(out+errOut, v); what != "" {
				t.Errorf("opm %s shows %s of the decrypted value %q:\n%s%s", strings.Join(args, " "), what, v, out, errOut)
			}
		}
	}
	// And yet it was applied: the cluster has the decrypted value.
	code, out, errOut := runOpm(t, "status", dir, "--env", "production", kc, "-o", "json")
	assert.Assert(t, code == 0 || code == 1, errOut)
	assert.Assert(t, strings.Contains(out, "app-creds"), out)
}

func TestSopsKeyMissingIsAConfigurationError(t *testing.T) {
	dir := deploytest.SopsDir(t, "prod", "")
	for _, e := range []string{"SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "SOPS_AGE_KEY_CMD"} {
		t.Setenv(e, "")
		assert.NilError(t, os.Unsetenv(e))
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	code, _, errOut := runOpm(t, "render", dir, "--env", "production")
	assert.Equal(t, code, 7, errOut)
	assert.Assert(t, strings.Contains(errOut, "secrets/production.sops.yaml"), errOut)
	assert.Assert(t, strings.Contains(errOut, "the file accepts: age age1"), errOut)
}
