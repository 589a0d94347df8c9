package pipeline_test

import (
	"encoding/json"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/golden"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func TestRenderExamplesGolden(t *testing.T) {
	for _, env := range []string{"staging", "production"} {
		t.Run(env, func(t *testing.T) {
			res, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples", Environment: env}})
			assert.NilError(t, err)
			y, err := res.YAML()
			assert.NilError(t, err)
			golden.Assert(t, string(y), "render/examples-"+env+".yaml")
		})
	}
}

func TestRenderJSONIsTheMachineInterface(t *testing.T) {
	res, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples", Environment: "staging", Releases: []string{"minecraft"}}})
	assert.NilError(t, err)
	b, err := json.Marshal(res)
	assert.NilError(t, err)
	var doc struct {
		Releases []map[string]json.RawMessage `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, len(doc.Releases), 1)
	for _, k := range []string{"name", "namespace", "environment", "releaseId", "moduleId", "module", "values", "manifestDigest", "changeId", "resources"} {
		_, ok := doc.Releases[0][k]
		assert.Check(t, ok, "missing %q", k)
	}
	var module map[string]string
	assert.NilError(t, json.Unmarshal(doc.Releases[0]["module"], &module))
	assert.DeepEqual(t, module, map[string]string{
		"path": "opmodel.dev/examples/modules/minecraft@v0", "name": "minecraft", "version": "0.1.0",
		"fqn": "opmodel.dev/examples/modules/minecraft@v0#minecraft",
	})
	var resources []map[string]any
	assert.NilError(t, json.Unmarshal(doc.Releases[0]["resources"], &resources))
	var kinds []string
	for _, r := range resources {
		kinds = append(kinds, r["kind"].(string))
	}
	assert.DeepEqual(t, kinds, []string{"PersistentVolumeClaim", "Service", "StatefulSet"})
	r := res.Releases[0]
	assert.Check(t, is.Contains(report.RenderedLine(r), "release minecraft env=staging namespace=staging id="+r.ReleaseID))
	assert.Check(t, is.Contains(report.RenderedLine(r), "resources=3"))
}
