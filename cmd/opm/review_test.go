package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline/report"
)

// gitExamples is a git repository holding a copy of examples/ on branch
// main, committed once; it returns the repository's directory.
func gitExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir("../../examples", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../../examples", p)
		dst := filepath.Join(dir, "examples", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	assert.NilError(t, err)
	gitRepo(t, dir, "examples")
	return dir
}

// gitRepo makes dir a git repository (branch main) whose one commit,
// msg, holds everything in it.
func gitRepo(t *testing.T, dir, msg string) {
	t.Helper()
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", msg)
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(b), old), "%s lacks %q", path, old)
	assert.NilError(t, os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

func TestReviewCommand(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	repo := gitExamples(t)
	dir := filepath.Join(repo, "examples")
	gitIn(t, repo, "checkout", "-q", "-b", "feature")

	// Nothing changed: nothing is rendered; --no-skip renders both sides.
	code, out, errOut := runOpm(t, "review", dir, "--base", "main", "--exit-code")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Contains(out, "4 release/environment pair(s) unchanged: inputs identical on both sides, not rendered"), out)
	assert.Assert(t, !strings.Contains(out, "release blog"), out)
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "--exit-code", "--no-skip")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Contains(out, "release blog (env staging, namespace staging)"), out)

	editFile(t, filepath.Join(dir, "releases.cue"), `name:       "minecraft"`, `name:       "minecraft-server"`)
	gitIn(t, repo, "commit", "-qam", "rename")
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "--env", "staging", "-r", "minecraft", "--exit-code", "-o", "json")
	assert.Equal(t, code, 1, errOut)
	var cs struct {
		BaseRef    string `json:"baseRef"`
		BaseCommit string `json:"baseCommit"`
		Releases   []struct {
			Name, Environment string
			Counts            struct{ Stale int }
		} `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &cs))
	// The cache's hits are on stderr, as a remote cache reports them:
	// none the first time, every render the second, the same review.
	assert.Check(t, strings.Contains(errOut, "render cache: 0 of 2 renders read from the cache, 2 rendered"), errOut)
	code, again, errOut := runOpm(t, "review", dir, "--base", "main", "--env", "staging", "-r", "minecraft", "--exit-code", "-o", "json")
	assert.Equal(t, code, 1, errOut)
	assert.Check(t, strings.Contains(errOut, "render cache: 2 of 2 renders read from the cache, 0 rendered"), errOut)
	assert.Equal(t, again, out)
	_, _, errOut = runOpm(t, "review", dir, "--base", "main", "--env", "staging", "-r", "minecraft", "--no-cache")
	assert.Check(t, !strings.Contains(errOut, "render cache"), errOut)
	assert.Equal(t, cs.BaseRef, "main")
	assert.Equal(t, cs.BaseCommit, gitIn(t, repo, "rev-parse", "main"))
	assert.Equal(t, len(cs.Releases), 1)
	assert.Equal(t, cs.Releases[0].Counts.Stale, 3)

	// An image bump, as a reviewer reads it first: what moves, in words.
	editFile(t, filepath.Join(dir, "releases.cue"), `image:    "ghcr.io/example/blog:1.4.2"`, `image:    "ghcr.io/example/blog:1.5.0"`)
	gitIn(t, repo, "commit", "-qam", "blog 1.5.0")
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "-r", "blog", "-o", "markdown")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "**What moves**\n\n- image ghcr.io/example/blog:1.4.2 → ghcr.io/example/blog:1.5.0 (Deployment web, container web) — blog in production, staging\n"), out)

	// The committed head says nothing; an uncommitted edit is reviewed
	// too, and the review says so on stderr and in the comment.
	assert.Check(t, !strings.Contains(errOut, "uncommitted"), errOut)
	editFile(t, filepath.Join(dir, "releases.cue"), `name:       "minecraft-server"`, `name:       "minecraft-srv"`)
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "--env", "staging", "-r", "minecraft", "-o", "markdown")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(errOut, "Warning: the head is the working tree, which has uncommitted changes"), errOut)
	assert.Check(t, strings.Contains(out, "The head is the working tree, with uncommitted changes"), out)
	gitIn(t, repo, "checkout", "--", ".")

	// A base that does not exist: not found, naming every ref tried.
	code, _, errOut = runOpm(t, "review", dir, "--base", "no-such-branch")
	assert.Equal(t, code, 5, errOut)
	assert.Assert(t, strings.Contains(errOut, `tried "no-such-branch", "origin/no-such-branch"`), errOut)

	code, _, errOut = runOpm(t, "review", dir)
	assert.Equal(t, code, 2)
	assert.Assert(t, strings.Contains(errOut, "--base is required"), errOut)
}

// opm review plan splits the pairs; each shard given the plan reviews its
// part; opm review merge of the parts is opm review's JSON.
func TestReviewPlanShardsAndMerge(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	repo := gitExamples(t)
	dir := filepath.Join(repo, "examples")
	gitIn(t, repo, "checkout", "-q", "-b", "feature")
	editFile(t, filepath.Join(dir, "releases.cue"), `difficulty: "normal"`, `difficulty: "hard"`)
	gitIn(t, repo, "commit", "-qam", "harder")

	code, out, errOut := runOpm(t, "review", "plan", dir, "--base", "main", "--shards", "2")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Contains(out, "4 release/environment pairs to review (0 unchanged), 8 renders of which 0 are cached"), out)
	assert.Assert(t, strings.Contains(out, "shard 1/2: 2 pairs") && strings.Contains(out, "shard 2/2: 2 pairs"), out)
	code, out, errOut = runOpm(t, "review", "plan", dir, "--base", "main", "--shards", "2", "-o", "json")
	assert.Equal(t, code, 0, errOut)
	plan := filepath.Join(t.TempDir(), "plan.json")
	assert.NilError(t, os.WriteFile(plan, []byte(out), 0o644))

	code, want, errOut := runOpm(t, "review", dir, "--base", "main", "-o", "json", "--no-cache")
	assert.Equal(t, code, 0, errOut)
	var parts []string
	for _, sh := range []string{"2/2", "1/2"} {
		code, out, errOut := runOpm(t, "review", dir, "--base", "main", "--shard", sh, "--plan", plan)
		assert.Equal(t, code, 0, errOut)
		p := filepath.Join(t.TempDir(), "part.json")
		assert.NilError(t, os.WriteFile(p, []byte(out), 0o644))
		parts = append(parts, p)
	}
	code, got, errOut := runOpm(t, append([]string{"review", "merge", "-o", "json"}, parts...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Equal(t, got, want)

	// --plan needs a shard, and a plan with a split.
	code, _, errOut = runOpm(t, "review", dir, "--base", "main", "--plan", plan)
	assert.Equal(t, code, 2)
	assert.Assert(t, strings.Contains(errOut, "give --shard I/N too"), errOut)
	_, out, _ = runOpm(t, "review", "plan", dir, "--base", "main", "-o", "json")
	assert.NilError(t, os.WriteFile(plan, []byte(out), 0o644))
	code, _, errOut = runOpm(t, "review", dir, "--base", "main", "--shard", "1/2", "--plan", plan)
	assert.Equal(t, code, 2)
	assert.Assert(t, strings.Contains(errOut, "has no split: make it with opm review plan --shards N"), errOut)
}

// retitledExamples is a clone of the examples on branch feature, whose
// last commit retitles the blog: a review against main has one diff.
func retitledExamples(t *testing.T) string {
	t.Helper()
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	repo := gitExamples(t)
	dir := filepath.Join(repo, "examples")
	gitIn(t, repo, "checkout", "-q", "-b", "feature")
	editFile(t, filepath.Join(dir, "releases.cue"), `title:    "Engineering blog"`, `title:    "Engineering notes"`)
	gitIn(t, repo, "commit", "-qam", "retitle")
	return dir
}

// Text output is coloured on a terminal, or with --color always; never
// with --color never, NO_COLOR set (auto), off a terminal (auto), or in
// JSON and Markdown, whatever --color says; a wrong --color is a usage
// error.
func TestColourFollowsTheFlagAndNoColor(t *testing.T) {
	dir := retitledExamples(t)
	review := func(args ...string) string {
		t.Helper()
		code, out, errOut := runOpm(t, append([]string{"review", dir, "--base", "main", "--env", "staging", "-r", "blog"}, args...)...)
		assert.Equal(t, code, 0, errOut)
		return out
	}
	const esc = "\x1b["
	coloured := review("--color", "always")
	assert.Check(t, strings.Contains(coloured, "\x1b[32m+"), "no green + line:\n%s", coloured)
	assert.Check(t, strings.Contains(coloured, "\x1b[31m-"), "no red - line:\n%s", coloured)
	for name, out := range map[string]string{
		"--color never":            review("--color", "never"),
		"auto, not a terminal":     review(),
		"json, --color always":     review("-o", "json", "--color", "always"),
		"markdown, --color always": review("-o", "markdown", "--color", "always"),
	} {
		assert.Check(t, !strings.Contains(out, esc), "%s: escape codes in the output", name)
	}
	t.Setenv("NO_COLOR", "1")
	assert.Check(t, !strings.Contains(review("--color", "auto"), esc), "NO_COLOR: escape codes in the output")
	code, _, errOut := runOpm(t, "review", dir, "--base", "main", "--color", "sometimes")
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, `--color "sometimes": use auto, always or never`), errOut)
	assert.Equal(t, report.PaintHealth("web  Current\nHealth:      not healthy", true), "web  \x1b[32mCurrent\x1b[0m\nHealth:      \x1b[31mnot healthy\x1b[0m")
}
