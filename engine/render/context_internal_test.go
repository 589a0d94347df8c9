package render

import (
	"testing"

	"cuelang.org/go/cue"
	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// The embedded provider's transformers declare #environmentMetadata (seed
// 002) and get the environment as such; a provider written for OPM's own
// context, which has none, gets it folded into the release's labels.
func TestEnvironmentMetadataOnlyWhereDeclared(t *testing.T) {
	deploytest.Registry(t, deploytest.OPMModules()...)
	dir := deploytest.Write(t, map[string]string{"cue.mod/module.cue": deploytest.OPMModuleFile, "deploy.cue": deploytest.OPMDeployment})
	d, err := load.Load(t.Context(), dir)
	assert.NilError(t, err)

	embedded, err := loadTransformers([]provider{{name: "kubernetes", value: d.Catalog.LookupPath(pathProvider)}})
	assert.NilError(t, err)
	assert.Assert(t, len(embedded) > 0)
	for _, tr := range embedded {
		assert.Check(t, tr.envAware, tr.fqn)
		assert.Check(t, tr.sharedContext, "%s: the catalog's transformers take the context evaluated once per component", tr.fqn)
	}
	opm, err := loadTransformers([]provider{{name: "kubernetes", value: d.Root.LookupPath(cue.ParsePath("providers.kubernetes"))}})
	assert.NilError(t, err)
	assert.Assert(t, len(opm) > 0)
	for _, tr := range opm {
		assert.Check(t, !tr.envAware, tr.fqn)
		assert.Check(t, !tr.sharedContext, tr.fqn)
	}
}
