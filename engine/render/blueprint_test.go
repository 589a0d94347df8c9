package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/render"
)

// TestBlueprintRegression tracks CUE's closedness regression in the
// cuelang.org/go this module pins: testdata/blueprint-regression.cue is
// valid CUE (v0.16.1 accepts it) that v0.17 refuses.
//
// When this test fails because CUE accepts the file, the pinned CUE has
// fixed the regression: delete withBlueprintWorkaround and
// detectBlueprintRegression (engine/render/blueprint.go) and
// load.Options.RelaxedClosedness, make TestBlueprintComponentRenders
// expect no warning, and update docs/opm-modules.md.
func TestBlueprintRegression(t *testing.T) {
	src, err := os.ReadFile("testdata/blueprint-regression.cue")
	assert.NilError(t, err)
	v := cuecontext.New().CompileBytes(src, cue.Filename("blueprint-regression.cue"))
	err = v.Validate()
	if err == nil {
		t.Fatal("the pinned cuelang.org/go accepts testdata/blueprint-regression.cue: the v0.17 closedness regression is fixed; remove the workaround (see this test's comment)")
	}
	assert.ErrorContains(t, err, "api.spec.statelessWorkload.scaling: field not allowed")

	// The evaluator option the workaround uses accepts it.
	relaxed := cuecontext.New(cuecontext.CUE_DEBUG("opendef")).CompileBytes(src, cue.Filename("blueprint-regression.cue"))
	assert.NilError(t, relaxed.Validate())
}

// A blueprint written as OPM's catalog writes them renders, with a warning
// that says why and how it was rendered.
func TestBlueprintComponentRenders(t *testing.T) {
	rels, err := render.Render(t.Context(), render.Options{Dir: "testdata/blueprint", Environment: "staging"})
	assert.NilError(t, err)
	assert.Equal(t, len(rels), 1)
	r := rels[0]
	var kinds []string
	for _, res := range r.Resources {
		kinds = append(kinds, res.Object.GetKind())
	}
	assert.DeepEqual(t, kinds, []string{"Deployment", "HorizontalPodAutoscaler"})
	hpa := r.Resources[1].Object.Object["spec"].(map[string]any)
	assert.Equal(t, hpa["minReplicas"], int64(2))
	assert.Equal(t, hpa["maxReplicas"], int64(4))
	assert.Equal(t, len(r.Warnings), 1)
	assert.Check(t, is.Contains(r.Warnings[0], "known CUE regression"))
	assert.Check(t, is.Contains(r.Warnings[0], "web.spec.scaledWeb.autoscaling"))
	assert.Check(t, is.Contains(r.Warnings[0], "test.example/blueprint/modules/scaled@v0#ScaledWeb"))
}

// The workaround never hides a real mistake: a field the blueprint's
// schema does not declare is still refused, at the user's line.
func TestBlueprintComponentTypoIsStillAnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blueprint")
	assert.NilError(t, os.CopyFS(dir, os.DirFS("testdata/blueprint")))
	p := filepath.Join(dir, "modules/scaled/scaled.cue")
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	s := strings.Replace(string(b), "autoscaling: {min: 2, max: 4}", "autoscaling: {min: 2, max: 4}\n\t\tautoscalin: {min: 2}", 1)
	assert.NilError(t, os.WriteFile(p, []byte(s), 0o644))

	_, err = render.Render(t.Context(), render.Options{Dir: dir, Environment: "staging"})
	assert.ErrorContains(t, err, "web.spec.scaledWeb.autoscalin: field not allowed")
	assert.ErrorContains(t, err, "scaled.cue:42:3")
	assert.Check(t, !strings.Contains(err.Error(), "known CUE v0.17"), "a typo is not blamed on CUE: %v", err)
}
