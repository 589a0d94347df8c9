package render_test

import (
	"context"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/render"
)

// A smoke test's throwaway namespace replaces the release's, whether the
// release sets it or the environment fills it; identity and objects follow.
func TestNamespaceOverride(t *testing.T) {
	dir := deployment(t, `
environments: staging: {namespace: "staging", metadata: labels: "tier": "dev"}
releases: own: {#module: _app, metadata: {namespace: "own-ns", labels: "team": "a", annotations: "note": "x"}, values: image: "myapp:v2"}
releases: filled: {#module: _app, values: image: "myapp:v2"}
`)
	plain, err := render.Render(context.Background(), render.Options{Dir: dir, Environment: "staging"})
	assert.NilError(t, err)
	over, err := render.Render(context.Background(), render.Options{Dir: dir, Environment: "staging", Namespace: "smoke-x1"})
	assert.NilError(t, err)
	assert.Equal(t, len(over), 2)
	for i, r := range over {
		assert.Equal(t, r.Namespace, "smoke-x1", r.Name)
		assert.Equal(t, r.Environment, "staging")
		assert.Equal(t, r.ReleaseID, uuid5("test.example/deploy/app@v0#app:"+r.Name+":smoke-x1:staging"))
		assert.Check(t, r.ReleaseID != plain[i].ReleaseID)
		assert.Equal(t, len(r.Resources), len(plain[i].Resources))
		for _, res := range r.Resources {
			assert.Equal(t, res.Object.GetNamespace(), "smoke-x1", res.ID().String())
			l := res.Object.GetLabels()
			assert.Equal(t, l["module-release.opmodel.dev/uuid"], r.ReleaseID)
			assert.Equal(t, l["environment.opmodel.dev/name"], "staging")
			if r.Name == "own" {
				assert.Equal(t, l["team"], "a")
				assert.Equal(t, res.Object.GetAnnotations()["note"], "x")
			}
		}
	}
	assert.Equal(t, plain[1].Namespace, "own-ns")
}
