package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// With OPM_VERIFY_SKIPS, a skip whose recorded change is not what the
// render gives fails loudly, naming the release; a right one passes.
func TestVerifySkipFailsAWrongSkip(t *testing.T) {
	dir := deploytest.HealthyDir(t, "environments: dev: namespace: \"dev\"\nreleases: app: #module: appmodule\n")
	sel := Selection{Dir: dir, Environment: "dev"}
	t.Setenv(EnvVerifySkips, "")
	if err := verifySkip(t.Context(), nil, sel, "app", "change-sha1-00000000", "sha256:00"); err != nil {
		t.Fatalf("without %s nothing is verified: %v", EnvVerifySkips, err)
	}
	t.Setenv(EnvVerifySkips, "1")
	err := verifySkip(t.Context(), nil, sel, "app", "change-sha1-00000000", "sha256:00")
	if err == nil || !strings.Contains(err.Error(), "release app") || !strings.Contains(err.Error(), "the skip was wrong") {
		t.Fatalf("a wrong skip: %v", err)
	}
	rels, err := Render(t.Context(), RenderOptions{Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifySkip(t.Context(), nil, sel, "app", rels.Releases[0].ChangeID, rels.Releases[0].ManifestDigest); err != nil {
		t.Fatalf("a right skip: %v", err)
	}
}

// Explain lists what the fingerprint covers, the environment's values
// files as evaluated among them, and sums to the fingerprint apply uses.
func TestExplainListsEveryInput(t *testing.T) {
	dir := deploytest.HealthyDir(t, "environments: dev: {namespace: \"dev\", valuesFiles: [\"dev.yaml\"]}\nreleases: app: #module: appmodule\n")
	if err := os.WriteFile(filepath.Join(dir, "dev.yaml"), []byte("stamp: one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sel := Selection{Dir: dir, Environment: "dev"}
	ex, err := Explain(t.Context(), sel)
	if err != nil || len(ex) != 1 {
		t.Fatalf("Explain: %v, %v", ex, err)
	}
	var kinds []string
	for _, in := range ex[0].Inputs {
		kinds = append(kinds, in.Kind+" "+in.Name)
	}
	all := strings.Join(kinds, "\n")
	for _, want := range []string{"valuesFiles dev.yaml", "module cue.mod/module.cue", "package test.example/deploy/app|app.cue", "renderer go:"} {
		if !strings.Contains(all, want) {
			t.Errorf("Explain lists no %q:\n%s", want, all)
		}
	}
	if fp := fingerprints(t.Context(), sel); fp["app"] != ex[0].Fingerprint {
		t.Errorf("Explain's fingerprint %s is not apply's %s", ex[0].Fingerprint, fp["app"])
	}
}

// A secret in-memory values file: explain prints neither its hash nor a
// fingerprint over it (either would confirm a guessed value offline).
func TestExplainSealsSecretInputs(t *testing.T) {
	dir := deploytest.HealthyDir(t, "environments: dev: namespace: \"dev\"\nreleases: app: #module: appmodule\n")
	canary := "stamp: canary-4711\n"
	ex, err := Explain(t.Context(), Selection{Dir: dir, Environment: "dev", SecretValues: []SecretValues{{Name: "s", Data: []byte(canary)}}})
	if err != nil || len(ex) != 1 {
		t.Fatalf("Explain: %v, %v", ex, err)
	}
	b, _ := json.Marshal(ex)
	sum := sha256.Sum256([]byte(canary))
	if strings.Contains(string(b), hex.EncodeToString(sum[:])) || strings.Contains(string(b), "inputs-sha256") {
		t.Fatalf("explain published the secret's hash or a fingerprint over it: %s", b)
	}
}
