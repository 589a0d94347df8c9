package load

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// The loader's file system is the host's with the overlay on top: an
// overlay file replaces the host's, adds to a host directory, or lives in
// directories only the overlay has, and every listing shows the union.
// fstest.TestFS checks it is a consistent fs.FS (Open, Stat, ReadFile,
// ReadDir, and an opened directory's ReadDir all agree).
func TestLoaderFSIsTheHostWithTheOverlayOnTop(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a.cue": "host a", "sub/b.cue": "host b", "sub/keep.txt": "keep"} {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	fsys := newLoaderFS(map[string][]byte{
		filepath.Join(dir, "a.cue"):           []byte("overlay a"), // replaces
		filepath.Join(dir, "sub", "c.cue"):    []byte("overlay c"), // added to a host directory
		filepath.Join(dir, "new", "deep.cue"): []byte("overlay d"), // in directories the host lacks
	}, NewFiles())
	root, err := fs.Sub(fsys, strings.TrimPrefix(dir, "/"))
	assert.NilError(t, err)
	assert.NilError(t, fstest.TestFS(root, "a.cue", "sub/b.cue", "sub/c.cue", "sub/keep.txt", "new/deep.cue"))

	for name, want := range map[string]string{"a.cue": "overlay a", "sub/b.cue": "host b", "sub/c.cue": "overlay c", "new/deep.cue": "overlay d"} {
		b, err := fs.ReadFile(root, name)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(string(b), want), name)
	}
	entries, err := fs.ReadDir(root, "sub")
	assert.NilError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Check(t, is.DeepEqual(names, []string{"b.cue", "c.cue", "keep.txt"}))
	st, err := fs.Stat(root, "new")
	assert.NilError(t, err)
	assert.Check(t, st.IsDir())
	_, err = fs.Stat(root, "missing.cue")
	assert.Check(t, is.ErrorIs(err, fs.ErrNotExist))
}

// A directory is read from the host once per load (one loaderFS): a
// second listing is the first one, even if the directory changed, and
// callers that sort or trim what they got do not change it.
func TestLoaderFSListsADirectoryOnce(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "b.cue"), nil, 0o644))
	fsys := newLoaderFS(nil, NewFiles())
	name := strings.TrimPrefix(dir, "/")
	first, err := fsys.ReadDir(name)
	assert.NilError(t, err)
	assert.Equal(t, len(first), 1)
	first[0] = nil // a caller writing into its slice
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "a.cue"), nil, 0o644))
	second, err := fsys.ReadDir(name)
	assert.NilError(t, err)
	assert.Equal(t, len(second), 1)
	assert.Equal(t, second[0].Name(), "b.cue")
	fresh, err := newLoaderFS(nil, NewFiles()).ReadDir(name)
	assert.NilError(t, err)
	assert.Equal(t, len(fresh), 2, "a new load sees the new file")
}

// A command's Files read each file from disk once for every loader that
// shares them (loads, the fingerprint's sources): a file whose bytes
// changed behind its unchanged size and modification time is still the
// first read — the proof that no second read happened — and one whose
// stat moved is read again, so nothing older than the disk is served.
func TestFilesReadAFileOnceAndAgainWhenItChanges(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "deploy.cue")
	assert.NilError(t, os.WriteFile(p, []byte("package deploy\n"), 0o644))
	st, err := os.Stat(p)
	assert.NilError(t, err)
	host := NewFiles()
	fsys := newLoaderFS(nil, host)
	name := strings.TrimPrefix(p, "/")
	first, err := fsys.ReadFile(name)
	assert.NilError(t, err)

	assert.NilError(t, os.WriteFile(p, []byte("package deplox\n"), 0o644))
	assert.NilError(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
	again, err := newLoaderFS(nil, host).ReadFile(name)
	assert.NilError(t, err)
	assert.Equal(t, string(again), string(first), "a second load of the command reads no file again")
	f, err := fsys.Open(name)
	assert.NilError(t, err)
	opened, err := io.ReadAll(f)
	assert.NilError(t, err)
	assert.Equal(t, string(opened), string(first))
	src, err := host.ReadFile(p)
	assert.NilError(t, err)
	assert.Equal(t, string(src), string(first), "nor does the fingerprint's read of its source")

	assert.NilError(t, os.WriteFile(p, []byte("package changed\n"), 0o644))
	moved, err := fsys.ReadFile(name)
	assert.NilError(t, err)
	assert.Equal(t, string(moved), "package changed\n", "a file whose stat moved is read again")
	fresh, err := newLoaderFS(nil, NewFiles()).ReadFile(name)
	assert.NilError(t, err)
	assert.Equal(t, string(fresh), "package changed\n")
}
