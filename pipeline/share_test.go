package pipeline_test

import (
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// manyConfigs is a module of n components, one ConfigMap each; the first
// tenth read the value rev.
func manyConfigs(n int) string {
	var b strings.Builder
	b.WriteString(`package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: rev: *"1" | string

#components: {
`)
	for i := range n {
		rev := ""
		if i < n/10 {
			rev = ", rev: #config.rev"
		}
		fmt.Fprintf(&b, "\tc%02d: {\n\t\tcore.#Configs\n\t\tspec: configs: \"c%02d\": data: {k: \"v%d\"%s}\n\t}\n", i, i, i, rev)
	}
	b.WriteString("}\n")
	return b.String()
}

// A release big enough to have its components shared out over the cores
// (on two or more; engine/render's share.go, whose differential tests
// prove the objects the same as one goroutine's) lives its week as any
// other on the real API server: applied, applied again with nothing to
// change, a value moved in a tenth of its components diffed and applied,
// then nothing left to diff.
func TestASharedReleaseLivesItsWeek(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{
		"app/app.cue": manyConfigs(60),
		"deploy.cue":  deploytest.Header + fmt.Sprintf("releases: app: {#module: appmodule, metadata: namespace: %q}\n", ns),
	})
	first, err := pipeline.Apply(t.Context(), applyOpts(dir))
	assert.NilError(t, err)
	assert.Equal(t, first.Releases[0].Counts.Created, 60)

	again, err := pipeline.Apply(t.Context(), applyOpts(dir))
	assert.NilError(t, err)
	r := again.Releases[0]
	assert.Equal(t, r.Counts.Created+r.Counts.Configured, 0)
	assert.Equal(t, r.ChangeID, first.Releases[0].ChangeID)

	moved := deploytest.Values(t, `rev: "2"`)
	d := diffRelease(t, dir, moved)
	assert.Equal(t, d.Counts.Modified, 6)
	assert.Equal(t, d.Counts.Unchanged, 54)
	applied, err := pipeline.Apply(t.Context(), applyOpts(dir, moved))
	assert.NilError(t, err)
	assert.Equal(t, applied.Releases[0].Counts.Configured, 6)
	assert.Equal(t, diffRelease(t, dir, moved).Counts.Modified, 0)
}
