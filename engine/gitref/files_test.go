package gitref

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

// ReadFiles gives the files of a commit under a directory, byte for
// byte, without a checkout; a tree a checkout could write differently
// is refused.
func TestReadFiles(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	got, err := ReadFiles(ctx, dir, c["f1"], "deploy")
	assert.NilError(t, err)
	assert.DeepEqual(t, got, map[string][]byte{
		"deploy/values.cue": []byte("name: \"f1\"\n"),
		"deploy/new.cue":    []byte("new: true\n"),
	})
	got, err = ReadFiles(ctx, dir, c["m1"], "deploy")
	assert.NilError(t, err)
	assert.DeepEqual(t, got, map[string][]byte{"deploy/values.cue": []byte("name: \"m1\"\n")})
	got, err = ReadFiles(ctx, dir, c["m1"], "elsewhere")
	assert.NilError(t, err)
	assert.Equal(t, len(got), 0)

	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		assert.NilError(t, err, "%s", out)
	}
	// A symbolic link: only a checkout makes it.
	assert.NilError(t, os.Symlink("values.cue", filepath.Join(dir, "deploy", "link.cue")))
	git("add", "-A")
	git("commit", "-q", "-m", "link")
	_, err = ReadFiles(ctx, dir, "HEAD", "deploy")
	assert.Assert(t, errors.Is(err, ErrNotPlain), "%v", err)
	git("rm", "-q", "deploy/link.cue")
	git("commit", "-q", "-m", "no link")
	_, err = ReadFiles(ctx, dir, "HEAD", "deploy")
	assert.NilError(t, err)

	// Attributes anywhere in the tree, or end-of-line conversion.
	assert.NilError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.cue text eol=crlf\n"), 0o644))
	git("add", "-A")
	git("commit", "-q", "-m", "attributes")
	_, err = ReadFiles(ctx, dir, "HEAD", "deploy")
	assert.Assert(t, errors.Is(err, ErrNotPlain), "%v", err)
	git("rm", "-q", ".gitattributes")
	git("commit", "-q", "-m", "no attributes")
	git("config", "core.autocrlf", "true")
	_, err = ReadFiles(ctx, dir, "HEAD", "deploy")
	assert.Assert(t, errors.Is(err, ErrNotPlain), "%v", err)
}

// ReadPaths gives exactly the files asked for that exist at the commit.
func TestReadPaths(t *testing.T) {
	ctx := context.Background()
	dir, c := repo(t)
	got, err := ReadPaths(ctx, dir, c["f1"], []string{"deploy/values.cue", "deploy/missing.yaml"})
	assert.NilError(t, err)
	assert.DeepEqual(t, got, map[string][]byte{"deploy/values.cue": []byte("name: \"f1\"\n")})
	got, err = ReadPaths(ctx, dir, c["f1"], nil)
	assert.NilError(t, err)
	assert.Equal(t, len(got), 0)
}
