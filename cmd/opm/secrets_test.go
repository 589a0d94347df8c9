package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// leaks says which form of value s shows: the value, its base64, or any
// prefix (6+ hex) of its unsalted SHA-256, which would let a reader
// confirm a guessed password offline.
func leaks(s, value string) string {
	if strings.Contains(s, value) {
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
		{"apply", dir, "--dry-run", "-o", "json"}, {"apply", dir, "--dry-run"},
		{"apply", dir, "-o", "json"},
		{"diff", dir, "-f", changed, "-o", "text"}, {"diff", dir, "-f", changed, "-o", "json"}, {"diff", dir, "-f", changed, "-o", "markdown"},
		{"apply", dir, "-f", changed, "--no-prune", "-o", "json"},
		{"prune", dir, "-f", changed, "--dry-run", "-o", "json"}, {"prune", dir, "-f", changed, "--dry-run"},
		{"status", dir, "-o", "table"}, {"status", dir, "-o", "json"}, {"status", dir, "-o", "yaml"},
		{"apply", dir, "-o", "text"},
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
