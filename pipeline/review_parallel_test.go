package pipeline_test

import (
	"encoding/json"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline"
)

// The review of every release × environment on several goroutines (each
// with its own loaded copies of both sides) equals the one-at-a-time
// review, byte for byte, including a release that fails to render.
func TestReviewParallelEqualsSequential(t *testing.T) {
	base, head := reviewDirs(t, nil, func(dir string) {
		renameMinecraft(t)(dir)
		reviewEdit(t, dir, "releases.cue", `difficulty: "normal"`, `difficulty: "impossible"`)
	})
	run := func(parallelism int) []byte {
		cs := review(t, base, head, pipeline.ReviewOptions{Parallelism: parallelism})
		b, err := json.Marshal(cs)
		assert.NilError(t, err)
		return b
	}
	sequential := run(1)
	parallel := run(3)
	assert.Equal(t, string(parallel), string(sequential))
	var cs pipeline.ChangeSet
	assert.NilError(t, json.Unmarshal(parallel, &cs))
	assert.Assert(t, len(cs.Releases) >= 4, "want every release in both environments, got %d", len(cs.Releases))
}
