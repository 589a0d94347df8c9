package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"

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
	// The log says what the cache answered (nothing yet), so a workflow
	// whose actions/cache restored nothing shows it.
	assert.Check(t, strings.Contains(whole.stdout.String(), "render cache: 0 of 8 renders read from the cache, 8 rendered"), whole.stdout.String())
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
		assert.Check(t, strings.Contains(job.stdout.String(), "renders read from the cache, 0 rendered"), "the whole review cached every render: %s", job.stdout.String())
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

// The documented sharded workflow (.github/workflows/review-sharded.yml)
// is wired as TestShardedReviewCommentsAsOne runs it (plan → shards given
// the plan file → merge), keeps the render cache outside the checkout,
// and its shell steps hand the merge job exactly the renders a shard
// added: run here around a real shard's review.
func TestShardedWorkflowCarriesEveryShardsRenders(t *testing.T) {
	b, err := os.ReadFile("../.github/workflows/review-sharded.yml")
	assert.NilError(t, err)
	type step struct {
		Uses string            `json:"uses"`
		Run  string            `json:"run"`
		With map[string]string `json:"with"`
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []step `json:"steps"`
		} `json:"jobs"`
	}
	assert.NilError(t, yaml.Unmarshal(b, &wf))
	action := func(job string) map[string]string {
		for _, s := range wf.Jobs[job].Steps {
			if s.Uses == "./" {
				return s.With
			}
		}
		t.Fatalf("job %s runs no opm step", job)
		return nil
	}
	assert.Equal(t, action("plan")["mode"], "plan")
	shard, merge := action("shard"), action("merge")
	assert.Equal(t, shard["shard"], "${{ matrix.shard }}")
	assert.Assert(t, shard["review-plan-file"] != "" && shard["kubeconfig"] == "" && merge["kubeconfig"] == "")
	assert.Assert(t, merge["shard"] == "" && merge["partials-dir"] != "")
	var touch, collect string
	for job, j := range wf.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "actions/cache/") {
				assert.Equal(t, s.With["path"], "~/.cache/opm", "job %s: the cache is opm's default, outside the checkout", job)
			}
			switch {
			case strings.Contains(s.Run, "touch"):
				touch = s.Run
			case strings.Contains(s.Run, "cp --parents"):
				collect = s.Run
			}
		}
	}
	assert.Assert(t, touch != "" && collect != "")

	// A runner: HOME holds the cache main's review filled; the pull
	// request moves on, so the shard renders its head anew.
	home, runnerTemp := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("OPM_CACHE_DIR", "")
	r := newRepo(t)
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "hard"`)
	r.commit("harder")
	assert.NilError(t, newHarness(t, r, "pull_request", "pull_request.json").run())
	r.edit("releases.cue", `difficulty: "hard"`, `difficulty: "peaceful"`)
	r.commit("gentler")
	cache := filepath.Join(home, ".cache", "opm")
	files := func(dir string) map[string]bool {
		out := map[string]bool{}
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				out[rel] = true
			}
			return err
		})
		return out
	}
	before := files(cache)
	assert.Assert(t, len(before) > 0, "main's review filled the cache")
	shell := func(script string) {
		t.Helper()
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = r.dir, append(os.Environ(), "RUNNER_TEMP="+runnerTemp)
		out, err := cmd.CombinedOutput()
		assert.NilError(t, err, "%s\n%s", script, out)
	}
	shell(touch)
	job := newHarness(t, r, "pull_request", "pull_request.json")
	job.env["INPUT_SHARD"] = "1/1"
	job.env["INPUT_PARTIALS-DIR"] = filepath.Join(runnerTemp, "partials")
	assert.NilError(t, job.run())
	shell(collect)
	added := map[string]bool{}
	for f := range files(cache) {
		if !before[f] {
			added[f] = true
		}
	}
	assert.Assert(t, len(added) > 0, "the shard rendered the head")
	assert.DeepEqual(t, files(filepath.Join(runnerTemp, "added")), added)

	// Why outside: a cache restored into the deployment directory (the
	// workspace, with path ".") is untracked files, which a shard refuses.
	inside := filepath.Join(r.dir, "examples", ".opm-cache", "00")
	assert.NilError(t, os.MkdirAll(inside, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(inside, "entry"), []byte("restored"), 0o644))
	assert.ErrorContains(t, job.run(), "uncommitted changes")
}
