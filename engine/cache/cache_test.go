package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

var kinds = []Kind{Render, Environments, Identity}

// What is stored is what is read, per kind: the same key under another
// kind is another entry.
func TestRoundTripPerKind(t *testing.T) {
	c := Open(t.TempDir(), 0, nil)
	for _, k := range kinds {
		assert.NilError(t, c.Put(k, "fp", []byte("body of "+string(k))))
	}
	for _, k := range kinds {
		b, ok := c.Get(k, "fp")
		assert.Assert(t, ok)
		assert.Equal(t, string(b), "body of "+string(k))
	}
	_, ok := c.Get(Render, "other")
	assert.Assert(t, !ok)
}

// Every way an entry can be wrong is a miss, and the entry goes: a byte
// flipped, a truncation, an entry of another key or kind copied into its
// place, garbage, nothing.
func TestCorruptEntriesAreMisses(t *testing.T) {
	for what, corrupt := range map[string]func(t *testing.T, c *Cache, p string){
		"flipped": func(t *testing.T, c *Cache, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)-3] ^= 0x20
			assert.NilError(t, os.WriteFile(p, b, 0o600))
		},
		"truncated": func(t *testing.T, c *Cache, p string) {
			b, _ := os.ReadFile(p)
			assert.NilError(t, os.WriteFile(p, b[:len(b)-2], 0o600))
		},
		"another key": func(t *testing.T, c *Cache, p string) {
			assert.NilError(t, c.Put(Identity, "other", []byte("forged")))
			b, _ := os.ReadFile(filepath.Join(c.dir, name(Identity, "other")))
			assert.NilError(t, os.WriteFile(p, b, 0o600))
		},
		"another kind": func(t *testing.T, c *Cache, p string) {
			assert.NilError(t, c.Put(Render, "fp", []byte("forged")))
			b, _ := os.ReadFile(filepath.Join(c.dir, name(Render, "fp")))
			assert.NilError(t, os.WriteFile(p, b, 0o600))
		},
		"garbage": func(t *testing.T, c *Cache, p string) {
			assert.NilError(t, os.WriteFile(p, []byte("not an entry at all"), 0o600))
		},
		"empty": func(t *testing.T, c *Cache, p string) {
			assert.NilError(t, os.WriteFile(p, nil, 0o600))
		},
	} {
		t.Run(what, func(t *testing.T) {
			c := Open(t.TempDir(), 0, nil)
			assert.NilError(t, c.Put(Identity, "fp", []byte(`{"namespace":"team-a"}`)))
			p := filepath.Join(c.dir, name(Identity, "fp"))
			corrupt(t, c, p)
			_, ok := c.Get(Identity, "fp")
			assert.Assert(t, !ok, "a %s entry was returned", what)
			_, err := os.Stat(p)
			assert.Assert(t, os.IsNotExist(err), "the %s entry is still there", what)
		})
	}
}

// A keyed cache reads only entries sealed with its key, of every kind:
// whoever can write the directory without the key — storing a well-formed
// unkeyed entry, one keyed otherwise, or rewriting a keyed entry's body and
// recomputing a plain checksum — is a miss; an unkeyed cache does not read
// keyed entries either.
func TestKeyedEntriesResistForgeryOfEveryKind(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			dir := t.TempDir()
			trusted := Open(dir, 0, []byte("only-trusted-runs-hold-this"))
			assert.NilError(t, trusted.Put(k, "fp", []byte("trusted")))
			b, ok := trusted.Get(k, "fp")
			assert.Assert(t, ok)
			assert.Equal(t, string(b), "trusted")
			assert.Assert(t, trusted.Keyed())

			for who, attacker := range map[string]*Cache{
				"unkeyed":        Open(dir, 0, nil),
				"another key":    Open(dir, 0, []byte("a guess")),
				"an empty key":   Open(dir, 0, []byte{}),
				"a key's prefix": Open(dir, 0, []byte("only-trusted")),
			} {
				_, ok := attacker.Get(k, "fp")
				assert.Assert(t, !ok, "%s: a keyed entry was read without its key", who)
				assert.NilError(t, attacker.Put(k, "fp", []byte("forged")))
				_, ok = trusted.Get(k, "fp")
				assert.Assert(t, !ok, "%s: the trusted cache returned an entry written without its key", who)
			}

			// The body rewritten in place, the seal line kept.
			assert.NilError(t, trusted.Put(k, "fp", []byte("trusted")))
			p := filepath.Join(dir, name(k, "fp"))
			old, err := os.ReadFile(p)
			assert.NilError(t, err)
			line, _, _ := bytes.Cut(old, []byte("\n"))
			assert.NilError(t, os.WriteFile(p, append(append(line, '\n'), "forged"...), 0o600))
			_, ok = trusted.Get(k, "fp")
			assert.Assert(t, !ok, "a rewritten body kept its seal")
		})
	}
}

// A symlink planted anywhere under the cache directory is never followed
// by a write: an entry's directory replaced by a link to a directory
// outside, or an entry's name pointing at a file outside, leaves what is
// outside untouched.
func TestWritesFollowNoSymlink(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	assert.NilError(t, os.WriteFile(victim, []byte("precious"), 0o600))

	t.Run("a directory of entries", func(t *testing.T) {
		dir := t.TempDir()
		c := Open(dir, 0, nil)
		shard := filepath.Join(dir, filepath.Dir(name(Render, "fp")))
		assert.NilError(t, os.Symlink(outside, shard))
		err := c.Put(Render, "fp", []byte("entry"))
		assert.ErrorContains(t, err, "is not a directory (a symlink is never followed)")
		names, _ := os.ReadDir(outside)
		assert.Equal(t, len(names), 1, "something was written outside the cache: %v", names)
		_, ok := c.Get(Render, "fp")
		assert.Assert(t, !ok)
	})
	t.Run("an entry", func(t *testing.T) {
		dir := t.TempDir()
		c := Open(dir, 0, nil)
		p := filepath.Join(dir, name(Render, "fp"))
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		assert.NilError(t, os.Symlink(victim, p))
		_, ok := c.Get(Render, "fp")
		assert.Assert(t, !ok, "a symlinked entry was read")
		assert.NilError(t, c.Put(Render, "fp", []byte("entry")))
		b, err := os.ReadFile(victim)
		assert.NilError(t, err)
		assert.Equal(t, string(b), "precious", "the write went through the link")
		b, ok = c.Get(Render, "fp")
		assert.Assert(t, ok && string(b) == "entry", "the link was replaced by the entry")
	})
}

// Over its bound, Trim drops the least recently used entries of every
// kind first; a read makes an entry recent again; a dead writer's
// temporary file goes; and Trim walks the directory at most once an hour.
func TestTrimEvictsLeastRecentlyUsedAcrossKinds(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, 1<<40, nil)
	body := bytes.Repeat([]byte("x"), 1000)
	old := time.Now().Add(-48 * time.Hour)
	entries := []struct {
		kind Kind
		key  string
	}{{Render, "a"}, {Environments, "b"}, {Identity, "c"}, {Render, "d"}}
	for i, e := range entries {
		assert.NilError(t, c.Put(e.kind, e.key, body))
		at := old.Add(time.Duration(i) * time.Hour)
		assert.NilError(t, os.Chtimes(filepath.Join(dir, name(e.kind, e.key)), at, at))
	}
	st, err := os.Stat(filepath.Join(dir, name(Render, "a")))
	assert.NilError(t, err)
	// a is the oldest, but read now: it is the most recent.
	_, ok := c.Get(Render, "a")
	assert.Assert(t, ok)
	tmp := filepath.Join(dir, filepath.Dir(name(Render, "a")), ".tmp-dead")
	assert.NilError(t, os.WriteFile(tmp, []byte("half"), 0o600))
	assert.NilError(t, os.Chtimes(tmp, old, old))

	small := Open(dir, 3*st.Size(), nil)
	assert.NilError(t, small.Trim())
	kept := map[string]bool{"a": true, "b": false, "c": false, "d": true}
	for _, e := range entries {
		_, err := os.Stat(filepath.Join(dir, name(e.kind, e.key)))
		assert.Equal(t, err == nil, kept[e.key], "entry %s", e.key)
	}
	_, err = os.Stat(tmp)
	assert.Assert(t, os.IsNotExist(err))

	// Within the hour, a Trim walks nothing: what was just stored stays,
	// however small the bound.
	assert.NilError(t, small.Put(Identity, "e", body))
	assert.NilError(t, Open(dir, 1, nil).Trim())
	_, ok = c.Get(Identity, "e")
	assert.Assert(t, ok, "a second Trim within the hour walked the cache")
	// An hour later it does.
	stamp := strconv.FormatInt(time.Now().Add(-2*time.Hour).Unix(), 10)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, trimStamp), []byte(stamp), 0o600))
	assert.NilError(t, Open(dir, 1, nil).Trim())
	_, ok = c.Get(Identity, "e")
	assert.Assert(t, !ok, "a Trim an hour later did not evict")
}

// Disabled caches are harmless.
func TestNilCache(t *testing.T) {
	var c *Cache
	assert.Assert(t, Open("", 0, nil) == nil)
	assert.NilError(t, c.Put(Render, "fp", []byte("x")))
	_, ok := c.Get(Render, "fp")
	assert.Assert(t, !ok)
	assert.NilError(t, c.Trim())
	assert.Assert(t, !c.Keyed())
	c.Forget(Render, "fp")
}
