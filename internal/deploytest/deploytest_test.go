package deploytest_test

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// The fixture's values must drive names, component and kind, or every
// scenario test built on it would test nothing.
func TestValuesDriveTheFixture(t *testing.T) {
	dir := deploytest.Dir(t, "ns1", `name: "x"`)
	f := deploytest.Values(t, `component: "srv"`, `type: "stateful"`, `config: {a: "b"}`)
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, ValuesFiles: []string{f}})
	assert.NilError(t, err)
	var got []string
	for _, r := range rels[0].Resources {
		assert.Equal(t, r.Component, "srv")
		got = append(got, r.ID().String())
	}
	assert.DeepEqual(t, got, []string{"ConfigMap/ns1/x-config", "Secret/ns1/x-creds", "Service/ns1/x", "StatefulSet.apps/ns1/x"})
}
