package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline"
)

// The sharded review workflow's logic: plan mode sizes the review and
// emits the shard matrix, each shard job writes a partial, the merge
// job comments; the comment and outputs are those of the unsharded
// review of the same pull request.
func TestShardedReviewCommentsAsOne(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	r := newRepo(t)
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "hard"`)
	r.commit("harder")

	planned := func() (map[string]string, pipeline.ReviewPlan) {
		plan := newHarness(t, r, "pull_request", "pull_request.json")
		plan.env["INPUT_MODE"] = "plan"
		plan.env["INPUT_REVIEW-TARGET"] = "1ms" // as many shards as allowed
		plan.env["INPUT_REVIEW-MAX-SHARDS"] = "3"
		assert.NilError(t, plan.run())
		out := plan.outputs()
		var p pipeline.ReviewPlan
		assert.NilError(t, json.Unmarshal([]byte(out["review-plan"]), &p))
		return out, p
	}
	// Nothing cached yet: every render is to do, as many shards as allowed.
	out, p := planned()
	assert.Equal(t, out["review-shards"], "3")
	assert.Assert(t, p.Split == nil, "the split is in the file, not the output")
	planFile := out["review-plan-file"]
	split, err := pipeline.ReadSplit(planFile)
	assert.NilError(t, err)
	assert.Equal(t, split.Shards, 3)
	assert.DeepEqual(t, split.Pairs(), []int{2, 1, 1})
	assert.Equal(t, p.Pairs, 4)
	assert.Equal(t, p.Renders, 8)
	assert.Equal(t, p.Cached, 0)
	var m struct {
		Include []struct {
			Shard string `json:"shard"`
		} `json:"include"`
	}
	assert.NilError(t, json.Unmarshal([]byte(out["review-matrix"]), &m))
	assert.Equal(t, len(m.Include), 3)

	whole := newHarness(t, r, "pull_request", "pull_request.json")
	assert.NilError(t, whole.run())
	want := whole.ours(prNumber)
	assert.Equal(t, len(want), 1)
	wantOut := whole.outputs()
	assert.Assert(t, wantOut["report"] != "", "the whole review is written for an artifact")
	report, err := os.ReadFile(wantOut["report"])
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(report), "## opm review"))

	// The unsharded review cached what it rendered: nothing left to do.
	// (The second plan's file is elsewhere: each job has its own temp.)
	out, p = planned()
	assert.Equal(t, p.Cached, p.Renders, "%+v", p)
	assert.Equal(t, out["review-shards"], "1")

	parts := filepath.Join(t.TempDir(), "partials")
	for _, e := range m.Include {
		job := newHarness(t, r, "pull_request", "pull_request.json")
		job.env["INPUT_SHARD"] = e.Shard
		job.env["INPUT_PARTIALS-DIR"] = parts
		job.env["INPUT_REVIEW-PLAN-FILE"] = planFile
		assert.NilError(t, job.run())
		assert.Equal(t, len(job.ours(prNumber)), 0, "a shard does not comment")
		_, err := os.Stat(job.outputs()["partial"])
		assert.NilError(t, err)
	}
	merge := newHarness(t, r, "pull_request", "pull_request.json")
	merge.env["INPUT_PARTIALS-DIR"] = parts
	assert.NilError(t, merge.run())
	got := merge.ours(prNumber)
	assert.Equal(t, len(got), 1)
	assert.Equal(t, got[0].Body, want[0].Body)
	gotOut := merge.outputs()
	for _, k := range []string{"digests", "change-ids", "stale-count", "has-changes"} {
		assert.Equal(t, gotOut[k], wantOut[k], k)
	}

	// A shard with a kubeconfig would have diffed against the cluster
	// instead; a plan file without a shard would be ignored: both refused.
	wrong := newHarness(t, r, "pull_request", "pull_request.json")
	wrong.env["INPUT_SHARD"], wrong.env["INPUT_KUBECONFIG"] = "1/3", "apiVersion: v1\nkind: Config\n"
	assert.ErrorContains(t, wrong.run(), "give the shard and merge jobs no kubeconfig")
	wrong = newHarness(t, r, "pull_request", "pull_request.json")
	wrong.env["INPUT_REVIEW-PLAN-FILE"] = planFile
	assert.ErrorContains(t, wrong.run(), "input review-plan-file tells a shard its part: give shard too")

	// A shard missing: the merge fails and says which.
	assert.NilError(t, os.Remove(filepath.Join(parts, "review-2-of-3.json")))
	err = merge.run()
	assert.ErrorContains(t, err, "shard 2/3 is missing")
}
