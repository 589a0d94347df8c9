package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

var sealKey = []byte("0123456789abcdef0123456789abcdef")

// entryFiles are the files of dir's entries.
func entryFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	assert.NilError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(p) != trimStamp {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// A sealed entry reads back under its seal key only: its body is not in
// the file, its file name is not the one an unsealed entry of its key
// would have (nor anything one can compute without the key), and another
// seal key, an unkeyed cache without one, or a byte changed misses —
// and the entry that does not open is removed.
func TestSealedEntriesOpenOnlyUnderTheirKey(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, 0, nil).WithSealKey(sealKey)
	assert.Assert(t, c.Sealing())
	body := []byte("data: {pin: 4711-secret}")
	assert.NilError(t, c.PutSealed(Component, "k", body))
	got, ok := c.GetSealed(Component, "k")
	assert.Assert(t, ok)
	assert.Equal(t, string(got), string(body))
	_, ok = c.GetSealed(Component, "other")
	assert.Assert(t, !ok)

	files := entryFiles(t, dir)
	assert.Equal(t, len(files), 1)
	b, err := os.ReadFile(files[0])
	assert.NilError(t, err)
	assert.Assert(t, !bytes.Contains(b, []byte("4711")), "the body is in the clear")
	unsealed := sha256.Sum256([]byte(string(Component) + "\x00k"))
	assert.Assert(t, !strings.Contains(files[0], hex.EncodeToString(unsealed[:])), "the file is named by the key alone")

	_, ok = Open(dir, 0, nil).GetSealed(Component, "k")
	assert.Assert(t, !ok, "an unkeyed cache without a seal key reads no sealed entry")
	assert.Assert(t, !Open(dir, 0, nil).Sealing())
	assert.NilError(t, Open(dir, 0, nil).PutSealed(Component, "k2", body))
	assert.Equal(t, len(entryFiles(t, dir)), 1, "nor writes one")

	other := Open(dir, 0, nil).WithSealKey(bytes.Repeat([]byte("z"), 32))
	_, ok = other.GetSealed(Component, "k")
	assert.Assert(t, !ok, "another seal key")

	// A byte of the ciphertext changed, the seal line recomputed (what an
	// unkeyed cache's writer can do): it does not open, and goes.
	_, ct, _ := bytes.Cut(b, []byte("\n"))
	ct[len(ct)-1] ^= 1
	k := sealedName(c.sealing(), Component, "k")
	assert.Equal(t, files[0], filepath.Join(dir, name(Component, k)))
	assert.NilError(t, os.WriteFile(files[0], append(append(c.seal(Component, k, ct), '\n'), ct...), 0o600))
	_, ok = c.GetSealed(Component, "k")
	assert.Assert(t, !ok, "a changed ciphertext opens")
	_, err = os.Stat(files[0])
	assert.Assert(t, os.IsNotExist(err), "the entry that does not open stays")
}

// A keyed cache (OPM_CACHE_KEY) seals with a key derived from its own, so
// every run that holds it reads what the others wrote, whatever seal key
// file each has; a run with another cache key does not.
func TestKeyedCachesSealWithTheirKey(t *testing.T) {
	dir := t.TempDir()
	a := Open(dir, 0, []byte("the cache key")).WithSealKey(sealKey)
	assert.NilError(t, a.PutSealed(Component, "k", []byte("body")))
	b := Open(dir, 0, []byte("the cache key")).WithSealKey(bytes.Repeat([]byte("q"), 32))
	got, ok := b.GetSealed(Component, "k")
	assert.Assert(t, ok)
	assert.Equal(t, string(got), "body")
	_, ok = Open(dir, 0, []byte("another key")).GetSealed(Component, "k")
	assert.Assert(t, !ok)
	assert.Assert(t, !bytes.Equal(a.sealing(), []byte("the cache key")), "the seal key is not the cache key itself")
}
