package pipeline

import (
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
	if err := verifySkip(t.Context(), sel, "app", "change-sha1-00000000", "sha256:00"); err != nil {
		t.Fatalf("without %s nothing is verified: %v", EnvVerifySkips, err)
	}
	t.Setenv(EnvVerifySkips, "1")
	err := verifySkip(t.Context(), sel, "app", "change-sha1-00000000", "sha256:00")
	if err == nil || !strings.Contains(err.Error(), "release app") || !strings.Contains(err.Error(), "the skip was wrong") {
		t.Fatalf("a wrong skip: %v", err)
	}
	rels, err := Render(t.Context(), RenderOptions{Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifySkip(t.Context(), sel, "app", rels.Releases[0].ChangeID, rels.Releases[0].ManifestDigest); err != nil {
		t.Fatalf("a right skip: %v", err)
	}
}
