package render_test

import (
	"context"
	"runtime"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/workers"
)

const manyReleases = `
environments: staging: {namespace: "staging", values: replicaCount: 2}
releases: {
	a: {#module: _app, values: image: "a:1"}
	b: {#module: _app, values: image: "b:1", metadata: namespace: "bee"}
	c: {#module: _app, values: {image: "c:1", logLevel: "debug"}}
	d: {#module: _app, values: image: "d:1"}
	e: {#module: _app, values: {image: "e:1", db: port: 6543}}
}
`

// withProcs runs the test body with GOMAXPROCS n, so Render takes its
// concurrent path even when the machine has one core.
func withProcs(t *testing.T, n int) {
	t.Helper()
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

func TestParallelRenderEqualsSequential(t *testing.T) {
	withProcs(t, 3)
	dir := deployment(t, manyReleases)
	ctx := context.Background()
	for _, env := range []string{"", "staging"} {
		opts := render.Options{Dir: dir, Environment: env}
		if env == "" {
			// Releases render as written need a namespace of their own.
			opts.Namespace = "plain"
		}
		assert.Assert(t, workers.Count(5, 0) > 1)
		parallel, err := render.Render(ctx, opts)
		assert.NilError(t, err)
		d, err := load.Load(ctx, dir)
		assert.NilError(t, err)
		sequential, err := render.FromDeployment(ctx, d, opts)
		assert.NilError(t, err)
		assert.Equal(t, len(parallel), 5)
		assert.Equal(t, len(parallel), len(sequential))
		for i := range sequential {
			p, s := parallel[i], sequential[i]
			assert.Equal(t, p.Key, s.Key)
			assert.Equal(t, p.ReleaseID, s.ReleaseID)
			assert.Equal(t, p.ManifestDigest, s.ManifestDigest)
			assert.Equal(t, p.ChangeID, s.ChangeID)
			assert.Equal(t, p.ValuesText, s.ValuesText)
			assert.Check(t, is.DeepEqual(p.Resources, s.Resources))
		}
		keys := []string{}
		for _, r := range parallel {
			keys = append(keys, r.Key)
		}
		assert.DeepEqual(t, keys, []string{"a", "b", "c", "d", "e"})
	}
}

// Two broken releases: the concurrent render reports the first in key
// order, as the sequential one does, whichever finishes first.
func TestParallelRenderReportsFirstError(t *testing.T) {
	withProcs(t, 3)
	dir := deployment(t, `
environments: staging: {namespace: "staging"}
releases: {
	a: {#module: _app, values: image: "a:1"}
	b: {#module: _app, values: {image: "b:1", logLevel: "loud"}}
	c: {#module: _app, values: image: "c:1"}
	d: {#module: _app, values: {image: "d:1", replicaCount: "many"}}
}
`)
	ctx := context.Background()
	opts := render.Options{Dir: dir, Environment: "staging"}
	d, err := load.Load(ctx, dir)
	assert.NilError(t, err)
	_, seqErr := render.FromDeployment(ctx, d, opts)
	assert.ErrorContains(t, seqErr, `release "b"`)
	for range 5 {
		_, err := render.Render(ctx, opts)
		assert.Error(t, err, seqErr.Error())
	}
}
