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

// A short value counts where it stands as a value, not where it is a
// piece of a longer identifier: CI once found the PIN 0815 as a group of
// a release ID (563e0b91-0815-544f-…), which names no secret.
func TestShowsAShortValueOnlyAsAValue(t *testing.T) {
	for text, want := range map[string]bool{
		"password: 0815":          true,
		`{"pin":"0815"}`:          true,
		"secret/pin-0815 created": true,
		"0815-db":                 true,
		"commit 3a0815ff9":        false,
		"releaseId: 563e0b91-0815-544f-b9ab-03f76e7f8f1b": false,
		"563e0b91-0815-544f-b9ab-03f76e7f8f1b 0815":       true,
	} {
		assert.Equal(t, deploytest.Shows(text, "0815"), want, text)
	}
}
