package gitref

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// repo makes a repository: main has commits m1, m2; feature branches off
// m1 and adds f1. It returns the directory and the commit of each.
func repo(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		assert.NilError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	write := func(name, content string) {
		t.Helper()
		assert.NilError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	commits := map[string]string{}
	commit := func(name string) {
		run("add", "-A")
		run("commit", "-q", "-m", name)
		commits[name] = run("rev-parse", "HEAD")
	}
	run("init", "-q", "-b", "main")
	write("deploy/values.cue", "name: \"m1\"\n")
	commit("m1")
	run("checkout", "-q", "-b", "feature")
	write("deploy/values.cue", "name: \"f1\"\n")
	write("deploy/new.cue", "new: true\n")
	commit("f1")
	run("checkout", "-q", "main")
	write("deploy/values.cue", "name: \"m2\"\n")
	commit("m2")
	run("checkout", "-q", "feature")
	return dir, commits
}

func TestMergeBase(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	got, err := MergeBase(ctx, dir, "main", "HEAD")
	assert.NilError(t, err)
	assert.Equal(t, got, c["m1"], "the fork point, not main's tip")

	got, err = MergeBase(ctx, dir, c["m2"], c["f1"])
	assert.NilError(t, err)
	assert.Equal(t, got, c["m1"])

	_, err = MergeBase(ctx, dir, "no-such-branch", "HEAD")
	assert.ErrorContains(t, err, `"no-such-branch"`)
}

func TestResolveAndRoot(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	got, err := Resolve(ctx, dir, "main")
	assert.NilError(t, err)
	assert.Equal(t, got, c["m2"])
	_, err = Resolve(ctx, dir, "")
	assert.ErrorContains(t, err, "empty")
	// An option-looking ref is a ref, not an option.
	_, err = Resolve(ctx, dir, "--all")
	assert.ErrorContains(t, err, "no such commit")

	root, err := Root(ctx, filepath.Join(dir, "deploy"))
	assert.NilError(t, err)
	want, _ := filepath.EvalSymlinks(dir)
	gotReal, _ := filepath.EvalSymlinks(root)
	assert.Equal(t, gotReal, want)
}

func TestCheckout(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	wt, err := Checkout(ctx, dir, "main")
	assert.NilError(t, err)
	assert.Equal(t, wt.Commit, c["m2"])

	b, err := os.ReadFile(filepath.Join(wt.Dir, "deploy", "values.cue"))
	assert.NilError(t, err)
	assert.Equal(t, string(b), "name: \"m2\"\n")
	_, err = os.Stat(filepath.Join(wt.Dir, "deploy", "new.cue"))
	assert.Assert(t, os.IsNotExist(err), "a file only on feature is not in main's tree")

	// The working tree is untouched.
	b, err = os.ReadFile(filepath.Join(dir, "deploy", "values.cue"))
	assert.NilError(t, err)
	assert.Equal(t, string(b), "name: \"f1\"\n")

	list := func() string {
		out, err := exec.Command("git", "-C", dir, "worktree", "list").CombinedOutput()
		assert.NilError(t, err, string(out))
		return string(out)
	}
	assert.Assert(t, is.Contains(list(), wt.Dir))

	assert.NilError(t, wt.Close(ctx))
	_, err = os.Stat(wt.Dir)
	assert.Assert(t, os.IsNotExist(err), "Close removes the files")
	assert.Assert(t, !strings.Contains(list(), wt.Dir), "Close removes git's record")
	assert.NilError(t, wt.Close(ctx), "a second Close is a no-op")
}

func TestCheckoutTwoRefsAtOnce(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	a, err := Checkout(ctx, dir, c["m1"])
	assert.NilError(t, err)
	defer a.Close(ctx)
	b, err := Checkout(ctx, dir, c["m1"])
	assert.NilError(t, err, "the same commit can be checked out twice (detached)")
	defer b.Close(ctx)
	assert.Assert(t, a.Dir != b.Dir)
}

func TestShallowHint(t *testing.T) {
	ctx := context.Background()
	dir, _ := repo(t)
	clone := filepath.Join(t.TempDir(), "clone")
	out, err := exec.Command("git", "clone", "-q", "--depth=1", "--branch", "feature", "file://"+dir, clone).CombinedOutput()
	assert.NilError(t, err, string(out))
	_, err = MergeBase(ctx, clone, "origin/main", "HEAD")
	assert.ErrorContains(t, err, "fetch-depth: 0")
}
