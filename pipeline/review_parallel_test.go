package pipeline_test

import (
	"encoding/json"
	"path/filepath"
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

// The side queues cover every case the sequential review does: a base
// that does not load (every release errs), no base at all (every object
// added), and a release only one side declares.
func TestReviewParallelEqualsSequentialOnEdgeCases(t *testing.T) {
	for name, dirs := range map[string]func(t *testing.T) (base, head string){
		"broken base": func(t *testing.T) (string, string) {
			return reviewDirs(t, nil, nil)
		},
		"no base": func(t *testing.T) (string, string) {
			_, head := reviewDirs(t, nil, nil)
			return filepath.Join(t.TempDir(), "absent"), head
		},
		"release only in the head": func(t *testing.T) (string, string) {
			return reviewDirs(t, nil, renameMinecraft(t))
		},
	} {
		t.Run(name, func(t *testing.T) {
			base, head := dirs(t)
			if name == "broken base" {
				reviewAppend(t, base, "releases.cue", "\nreleases: blog: metadata: namespace: 42\n")
			}
			run := func(parallelism int) []byte {
				cs := review(t, base, head, pipeline.ReviewOptions{Parallelism: parallelism})
				b, err := json.Marshal(cs)
				assert.NilError(t, err)
				return b
			}
			sequential := run(1)
			assert.Equal(t, string(run(3)), string(sequential))
			assert.Equal(t, string(run(2)), string(sequential))
			var cs pipeline.ChangeSet
			assert.NilError(t, json.Unmarshal(sequential, &cs))
			assert.Assert(t, len(cs.Releases) >= 4, "%d releases reviewed", len(cs.Releases))
			if name == "broken base" {
				assert.Assert(t, cs.Releases[0].Error != "", "the broken base is reported")
			}
		})
	}
}
