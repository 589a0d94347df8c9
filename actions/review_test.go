package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/actions/comment"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

const prNumber = 42 // testdata/events/pull_request.json

// expectedRevisions renders the repository's head independently of the
// Action: what the digests and change-ids outputs must hold.
func expectedRevisions(t *testing.T, r *repo, envs ...string) (digests, changeIDs map[string]string) {
	t.Helper()
	digests, changeIDs = map[string]string{}, map[string]string{}
	for _, env := range envs {
		res, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: filepath.Join(r.dir, "examples"), Environment: env}})
		assert.NilError(t, err)
		for _, rel := range res.Releases {
			digests[rel.Name+"/"+env], changeIDs[rel.Name+"/"+env] = rel.ManifestDigest, rel.ChangeID
		}
	}
	return digests, changeIDs
}

func jsonMap(t *testing.T, s string) map[string]string {
	t.Helper()
	m := map[string]string{}
	assert.NilError(t, json.Unmarshal([]byte(s), &m), "output %q is not a JSON map", s)
	return m
}

func TestReviewCommentIsCreatedThenUpdated(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename minecraft")
	h := newHarness(t, r, "pull_request", "pull_request.json")
	// 130 comments by people first: ours lands on the second page.
	for i := range 130 {
		h.srv.Seed(prNumber, fmt.Sprintf("user%d", i%7), fmt.Sprintf("LGTM %d", i))
	}
	// Someone quotes a review comment, marker included: never ours to edit.
	marker := comment.Marker("pr-review/review/all")
	quoted := "> " + marker + "\n> ## opm review: production, staging"
	quotedID := h.srv.Seed(prNumber, "mallory", quoted)

	assert.NilError(t, h.run())
	ours := h.ours(prNumber)
	assert.Equal(t, len(ours), 1, "one comment created")
	first := ours[0]
	assert.Assert(t, strings.HasPrefix(first.Body, marker+"\n"), "the marker comes first")
	contains(t, first.Body, "## opm review: production, staging")
	contains(t, first.Body, "**6** to prune") // 3 stale objects in each environment
	contains(t, first.Body, "PersistentVolumeClaim/staging/minecraft-data is no longer rendered; apply keeps it")
	checkBalanced(t, first.Body)

	out := h.outputs()
	assert.Equal(t, out["comment-url"], fmt.Sprintf("https://github.example/acme/deploy/pull/%d#issuecomment-%d", prNumber, first.ID))
	assert.Equal(t, out["stale-count"], "6")
	assert.Equal(t, out["has-changes"], "true")
	digests, changeIDs := expectedRevisions(t, r, "production", "staging")
	assert.DeepEqual(t, jsonMap(t, out["digests"]), digests)
	assert.DeepEqual(t, jsonMap(t, out["change-ids"]), changeIDs)
	assert.Equal(t, len(digests), 4)

	// The job summary has the same review (without the marker).
	sum := h.summary()
	contains(t, sum, "## opm review: production, staging")
	assert.Assert(t, !strings.Contains(sum, "<!-- opm:pr-review:"))
	contains(t, sum, "minecraft-server-data")
	contains(t, h.stdout.String(), "::group::opm review: 4 releases")

	// A second push changes something else: the same comment is updated.
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "hard"`)
	r.commit("harder")
	assert.NilError(t, h.run())
	ours = h.ours(prNumber)
	assert.Equal(t, len(ours), 1, "still one comment")
	assert.Equal(t, ours[0].ID, first.ID, "updated in place")
	contains(t, ours[0].Body, "+          value: hard")
	assert.Equal(t, h.outputs()["comment-url"], out["comment-url"])

	writes := h.writes()
	assert.Equal(t, len(writes), 2, "%v", writes)
	assert.Assert(t, strings.HasPrefix(writes[0], fmt.Sprintf("POST /repos/acme/deploy/issues/%d/comments", prNumber)))
	assert.Equal(t, writes[1], fmt.Sprintf("PATCH /repos/acme/deploy/issues/comments/%d", first.ID))
	reads := strings.Join(h.srv.Requests(), "\n")
	contains(t, reads, "per_page=100")
	contains(t, reads, "page=2")

	for _, c := range h.srv.Comments(prNumber) {
		if c.ID == quotedID {
			assert.Equal(t, c.Body, quoted, "another author's comment is left alone")
		}
	}
}

func TestReviewNoChangesUpdatesTheComment(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "hard"`)
	r.commit("harder")
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	// GitHub Enterprise Server serves the API under /api/v3.
	h.env["GITHUB_API_URL"] = h.srv.URL + "/api/v3"
	assert.NilError(t, h.run())
	for _, req := range h.srv.Requests() {
		assert.Assert(t, strings.Contains(req, " /api/v3/"), "request %q ignores GITHUB_API_URL", req)
	}
	first := h.ours(prNumber)
	assert.Equal(t, len(first), 1)
	contains(t, first[0].Body, "**1** to change")
	contains(t, first[0].Body, "<!-- opm:pr-review:pr-review/review/staging -->") // the key names the environments

	// The next push reverts it: "no changes" replaces the old review.
	r.edit("releases.cue", `difficulty: "hard"`, `difficulty: "normal"`)
	r.commit("revert")
	assert.NilError(t, h.run())
	now := h.ours(prNumber)
	assert.Equal(t, len(now), 1)
	assert.Equal(t, now[0].ID, first[0].ID)
	contains(t, now[0].Body, "**No changes.**")
	assert.Assert(t, !strings.Contains(now[0].Body, "to change"))
	out := h.outputs()
	assert.Equal(t, out["has-changes"], "false")
	assert.Equal(t, out["stale-count"], "0")
	contains(t, h.summary(), "**No changes.**")
}

func TestReviewForkWritesSummaryOnly(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename")
	h := newHarness(t, r, "pull_request", "pull_request_fork.json")
	h.srv.ReadOnly = true // what a fork's token gets
	assert.NilError(t, h.run(), "a fork's pull request does not fail the job")
	assert.Equal(t, len(h.srv.Requests()), 0, "not even a read: %v", h.srv.Requests())
	contains(t, h.stdout.String(), "::notice::This pull request comes from the fork mallory/deploy")
	contains(t, h.summary(), "**6** to prune")
	out := h.outputs()
	assert.Equal(t, out["comment-url"], "")
	assert.Equal(t, out["stale-count"], "6")
}

func TestReviewWithoutTokenWritesSummaryOnly(t *testing.T) {
	r := newRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	delete(h.env, "INPUT_GITHUB_TOKEN")
	assert.NilError(t, h.run())
	assert.Equal(t, len(h.srv.Requests()), 0)
	contains(t, h.stdout.String(), "::notice::No github-token")
	contains(t, h.summary(), "**No changes.**")
}

func TestReviewForbiddenTokenWarns(t *testing.T) {
	r := newRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.srv.ReadOnly = true // same repository, but no pull-requests: write
	assert.NilError(t, h.run())
	contains(t, h.stdout.String(), "::warning::The token may not comment")
	contains(t, h.summary(), "## opm review")
}

func TestReviewCommentOff(t *testing.T) {
	r := newRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_COMMENT"] = "false"
	assert.NilError(t, h.run())
	assert.Equal(t, len(h.srv.Requests()), 0)
}

func TestReviewPushComparesWithBefore(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename")
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_ENVIRONMENTS"] = "production"
	assert.NilError(t, h.run())
	assert.Equal(t, len(h.srv.Requests()), 0, "a push has no pull request to comment on")
	out := h.outputs()
	assert.Equal(t, out["stale-count"], "3")
	_, changeIDs := expectedRevisions(t, r, "production")
	assert.DeepEqual(t, jsonMap(t, out["change-ids"]), changeIDs)
	contains(t, h.summary(), "## opm review: production")
}

func TestReviewBaseRefInput(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "hard"`)
	r.commit("harder")
	h := newHarness(t, r, "workflow_dispatch", "push.json")
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	h.env["INPUT_RELEASES"] = "minecraft"
	err := h.run()
	assert.ErrorContains(t, err, "needs the base-ref input")
	contains(t, h.summary(), "opm review failed")

	h.env["INPUT_BASE-REF"] = "main"
	assert.NilError(t, h.run())
	out := h.outputs()
	assert.Equal(t, out["has-changes"], "true")
	assert.DeepEqual(t, mapKeys(jsonMap(t, out["digests"])), []string{"minecraft/staging"})

	h.env["INPUT_BASE-REF"] = "no-such-branch"
	assert.ErrorContains(t, h.run(), `"no-such-branch"`)
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestReviewFailOnPrune(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename")
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_FAIL-ON-PRUNE"] = "true"
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	err := h.run()
	assert.ErrorContains(t, err, "3 objects would be pruned and fail-on-prune is set")
	assert.Equal(t, len(h.ours(prNumber)), 1, "the review is still posted")
	assert.Equal(t, h.outputs()["stale-count"], "3", "and the outputs still set")

	// Without stale objects fail-on-prune passes.
	r.edit("releases.cue", `name:       "minecraft-server"`, `name:       "minecraft"`)
	r.commit("undo")
	assert.NilError(t, h.run())
}

func TestReviewRenderErrorFailsAfterReporting(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "impossible"`)
	r.commit("break minecraft")
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	err := h.run()
	assert.ErrorContains(t, err, "1 of 2 releases could not be reviewed (minecraft/staging)")
	body := h.ours(prNumber)[0].Body
	contains(t, body, "| minecraft | staging | staging | | | | ❌ error |")
	contains(t, body, "examples/releases.cue:")
	assert.Assert(t, !strings.Contains(body, r.dir), "paths are relative to the repository")
	assert.Assert(t, !strings.Contains(body, "opm-gitref-"), "the base worktree's path is not shown")
	contains(t, body, "| blog | staging |") // the other release is still reviewed
	checkBalanced(t, body)
}

func TestReviewInputErrors(t *testing.T) {
	r := newRepo(t)
	for input, value := range map[string]string{"INPUT_MODE": "destroy", "INPUT_COMMENT": "maybe", "INPUT_MAX-HISTORY": "0"} {
		h := newHarness(t, r, "pull_request", "pull_request.json")
		h.env[input] = value
		err := h.run()
		assert.ErrorContains(t, err, strconv.Quote(value))
	}
}

// A 2 MB diff: the comment stays under GitHub's limit (the fake server
// enforces it too), every fence and <details> is closed, and the job
// summary keeps more of it.
func TestReviewHugeDiffStaysUnderTheLimit(t *testing.T) {
	r := newRepo(t)
	var title strings.Builder
	title.WriteString("\"\"\"\n")
	for i := range 36000 {
		fmt.Fprintf(&title, "\t\tparagraph %05d of a blog title that grew far too long\n", i)
	}
	title.WriteString("\t\t\"\"\"")
	r.edit("releases.cue", `title:    "Engineering blog"`, "title: "+title.String())
	r.commit("a very long title")
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	h.env["INPUT_RELEASES"] = "blog"
	assert.NilError(t, h.run())

	body := h.ours(prNumber)[0].Body
	t.Logf("comment: %d bytes, summary: %d bytes", len(body), len(h.summary()))
	assert.Assert(t, len(body) <= report.MaxCommentLength, "%d", len(body))
	assert.Assert(t, len(body) > report.MaxCommentLength/2, "the budget is used")
	checkBalanced(t, body)
	assert.Assert(t, strings.Contains(body, "[job summary](https://github.example/acme/deploy/actions/runs/4242)"), "points at the summary")
	assert.Assert(t, strings.Contains(body, "lines of this diff cut"), "says what was cut")

	sum := h.summary()
	assert.Assert(t, len(sum) <= 1<<20, "%d", len(sum))
	assert.Assert(t, len(sum) > 1<<19)
	checkBalanced(t, sum)
}

// `opm review --base main -o markdown` on a laptop prints exactly what the
// Action writes to the job summary (the runner protocol adds one newline)
// and, after the marker line, to the pull-request comment.
func TestReviewMarkdownMatchesTheCLI(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.edit("releases.cue", `difficulty: "normal"`, `difficulty: "hard"`)
	r.commit("rename and harder")
	h := newHarness(t, r, "pull_request", "pull_request.json")
	assert.NilError(t, h.run())

	opm := filepath.Join(t.TempDir(), "opm")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", opm, "../cmd/opm")
	out, err := build.CombinedOutput()
	assert.NilError(t, err, string(out))
	cli := exec.Command(opm, "review", "examples", "--base", "main", "-o", "markdown")
	cli.Dir = r.dir
	var stderr bytes.Buffer
	cli.Stderr = &stderr
	md, err := cli.Output()
	assert.NilError(t, err, stderr.String())

	contains(t, string(md), "**6** to prune")
	contains(t, string(md), "<sub>opm ")
	assert.Equal(t, h.summary(), string(md)+"\n")
	body := h.ours(prNumber)[0].Body
	marker, rest, _ := strings.Cut(body, "\n")
	assert.Assert(t, strings.HasPrefix(marker, "<!-- opm:pr-review:"))
	assert.Equal(t, rest, string(md))
}

// A mistyped environment or release fails the step with the name the user
// probably meant, as the CLI does: the suggestion comes from the pipeline.
func TestReviewSuggestsTheNameMeant(t *testing.T) {
	r := newRepo(t)
	for input, want := range map[string]string{
		"INPUT_ENVIRONMENTS": `environment "stagin" is declared neither in the head nor in the base; did you mean "staging"?`,
		"INPUT_RELEASES":     `release "stagin" is declared neither in the head nor in the base; releases`,
	} {
		h := newHarness(t, r, "pull_request", "pull_request.json")
		h.env[input] = "stagin"
		assert.ErrorContains(t, h.run(), want)
	}
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_RELEASES"] = "blgo"
	assert.ErrorContains(t, h.run(), `did you mean "blog"?`)
}
