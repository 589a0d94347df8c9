package gitref

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

func TestStateOf(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	deploy := filepath.Join(dir, "deploy")
	s, err := StateOf(ctx, deploy)
	assert.NilError(t, err)
	assert.DeepEqual(t, s, State{Commit: c["f1"], Ref: "feature"})

	// A file outside the directory does not make it dirty; one inside does.
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644))
	s, err = StateOf(ctx, deploy)
	assert.NilError(t, err)
	assert.Equal(t, s.Dirty, false)
	assert.NilError(t, os.WriteFile(filepath.Join(deploy, "values.cue"), []byte("name: \"dirty\"\n"), 0o644))
	s, err = StateOf(ctx, deploy)
	assert.NilError(t, err)
	assert.Equal(t, s.Dirty, true)

	// A worktree of a tagged commit: detached, named by the tag.
	tag := exec.Command("git", "-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "v1.0.0", c["m1"])
	tag.Dir = dir
	out, err := tag.CombinedOutput()
	assert.NilError(t, err, string(out))
	wt, err := Checkout(ctx, dir, c["m1"])
	assert.NilError(t, err)
	defer wt.Close(ctx)
	s, err = StateOf(ctx, filepath.Join(wt.Dir, "deploy"))
	assert.NilError(t, err)
	assert.DeepEqual(t, s, State{Commit: c["m1"], Ref: "v1.0.0"})

	_, err = StateOf(ctx, t.TempDir())
	assert.ErrorContains(t, err, "reading the commit of")
}
