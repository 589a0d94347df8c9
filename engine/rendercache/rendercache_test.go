package rendercache

import (
	"os"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
)

func rendered(t *testing.T, values string) *render.Release {
	t.Helper()
	rels, err := render.Render(t.Context(), render.Options{Dir: deploytest.Dir(t, "team-a", values)})
	assert.NilError(t, err)
	assert.Equal(t, len(rels), 1)
	return rels[0]
}

// What is stored is what is read: every object, byte for byte, and the
// identifiers; the cost comes back for balancing.
func TestRoundTrip(t *testing.T) {
	c := Open(t.TempDir(), 0, nil)
	rel := rendered(t, `withSecret: false`)
	assert.Assert(t, Cacheable(rel))
	assert.NilError(t, c.Put("fp-1", rel, 1500*time.Millisecond))
	got, cost, ok := c.Get("fp-1")
	assert.Assert(t, ok)
	assert.Equal(t, cost, 1500*time.Millisecond)
	assert.Equal(t, got.ManifestDigest, rel.ManifestDigest)
	assert.Equal(t, got.ChangeID, rel.ChangeID)
	assert.Equal(t, got.Name, rel.Name)
	assert.Equal(t, got.ValuesText, rel.ValuesText)
	assert.Equal(t, len(got.Resources), len(rel.Resources))
	for i := range rel.Resources {
		want, _ := rel.Resources[i].Object.MarshalJSON()
		have, _ := got.Resources[i].Object.MarshalJSON()
		assert.Equal(t, string(have), string(want))
		assert.Equal(t, got.Resources[i].Component, rel.Resources[i].Component)
	}
	if _, _, ok := c.Get("fp-2"); ok {
		t.Fatal("another fingerprint hit")
	}
}

// A release holding secret data never reaches disk.
func TestSecretsAreNeverStored(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, 0, nil)
	rel := rendered(t, `secret: "a-canary-value-77"`)
	assert.Assert(t, !Cacheable(rel))
	assert.NilError(t, c.Put("fp", rel, time.Second))
	_, _, ok := c.Get("fp")
	assert.Assert(t, !ok)
	entries, _ := os.ReadDir(dir)
	assert.Equal(t, len(entries), 0)
}

// Beyond the one cache's seal, a read checks what the entry says: an
// entry of another fingerprint sealed under this one's (as a forger with
// an unkeyed cache can write), and one whose objects do not hash to its
// digest, are misses, and go.
func TestEntriesThatDoNotCheckOutAreMisses(t *testing.T) {
	rel := rendered(t, `withSecret: false`)
	t.Run("misplaced", func(t *testing.T) {
		dir := t.TempDir()
		c := Open(dir, 0, nil)
		assert.NilError(t, c.Put("other", rel, time.Second))
		body, ok := cache.Open(dir, 0, nil).Get(cache.Render, "other")
		assert.Assert(t, ok)
		assert.NilError(t, cache.Open(dir, 0, nil).Put(cache.Render, "fp", body))
		_, _, ok = c.Get("fp")
		assert.Assert(t, !ok, "an entry stored under another fingerprint was returned")
		_, ok = cache.Open(dir, 0, nil).Get(cache.Render, "fp")
		assert.Assert(t, !ok, "the misplaced entry is still there")
	})
	t.Run("digest", func(t *testing.T) {
		c := Open(t.TempDir(), 0, nil)
		other := *rel
		other.ManifestDigest = "sha256:" + "00000000000000000000000000000000000000000000000000000000000000"
		assert.NilError(t, c.Put("fp", &other, time.Second))
		_, _, ok := c.Get("fp")
		assert.Assert(t, !ok, "an entry whose objects do not hash to its digest was returned")
	})
}

// Disabled caches are harmless.
func TestNilCache(t *testing.T) {
	var c *Cache
	assert.Assert(t, Open("", 0, nil) == nil)
	assert.NilError(t, c.Put("fp", &render.Release{}, 0))
	_, _, ok := c.Get("fp")
	assert.Assert(t, !ok)
	assert.NilError(t, c.Trim())
}

// A keyed cache reads only entries authenticated with its key: an entry
// forged by someone who can write the directory but lacks the key — a
// well-formed unkeyed entry of another render, or one keyed otherwise —
// is a miss, and an unkeyed cache does not read keyed entries.
func TestKeyedEntriesResistForgery(t *testing.T) {
	rel := rendered(t, `withSecret: false`)
	forged := rendered(t, `withSecret: false, replicas: 9`)
	assert.Assert(t, forged.ManifestDigest != rel.ManifestDigest)
	dir := t.TempDir()
	trusted := Open(dir, 0, []byte("only-trusted-runs-hold-this"))
	assert.NilError(t, trusted.Put("fp", rel, time.Second))
	got, _, ok := trusted.Get("fp")
	assert.Assert(t, ok)
	assert.Equal(t, got.ManifestDigest, rel.ManifestDigest)
	_, ok = trusted.Cost("fp")
	assert.Assert(t, ok)

	for name, attacker := range map[string]*Cache{
		"unkeyed":        Open(dir, 0, nil),
		"another key":    Open(dir, 0, []byte("a guess")),
		"an empty key":   Open(dir, 0, []byte{}),
		"a key's prefix": Open(dir, 0, []byte("only-trusted")),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, ok := attacker.Get("fp")
			assert.Assert(t, !ok, "a keyed entry was read without its key")
			assert.NilError(t, attacker.Put("fp", forged, time.Second))
			_, _, ok = trusted.Get("fp")
			assert.Assert(t, !ok, "the trusted cache returned a render written without its key")
			_, ok = trusted.Cost("fp")
			assert.Assert(t, !ok)
		})
	}
}
