package operation_test

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// The one cache seals what may hold Secret data under a key that is not in
// its directory: the user's own, made under the user configuration
// directory when a command first seals something and the same on every
// command after, or, with OPM_CACHE_KEY, one derived from it (no key file
// is made). No cache: nothing is made.
func TestOpenCacheSealsWithAKeyOutsideTheCache(t *testing.T) {
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	t.Setenv(operation.EnvCacheKey, "")
	keyFile := filepath.Join(config, "opm", "seal.key")

	dir := t.TempDir()
	c := operation.OpenCache(dir, nil)
	_, err := os.Stat(keyFile)
	assert.Assert(t, os.IsNotExist(err), "a key made before anything was sealed")
	assert.Assert(t, c.Sealing())
	st, err := os.Stat(keyFile)
	assert.NilError(t, err)
	assert.Equal(t, st.Mode().Perm(), os.FileMode(0o600))
	assert.NilError(t, c.PutSealed(cache.Component, "k", []byte("body")))
	b, ok := operation.OpenCache(dir, nil).GetSealed(cache.Component, "k")
	assert.Assert(t, ok, "the next command reads what this one sealed")
	assert.Equal(t, string(b), "body")

	// The key file is the seal: without it (a copy of the directory on
	// another machine) the entry is a miss.
	assert.NilError(t, os.Remove(keyFile))
	_, ok = operation.OpenCache(dir, nil).GetSealed(cache.Component, "k")
	assert.Assert(t, !ok)

	keyed := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(operation.EnvCacheKey, "a key only trusted runs hold")
	c = operation.OpenCache(keyed, nil)
	assert.Assert(t, c.Sealing())
	assert.NilError(t, c.PutSealed(cache.Component, "k", []byte("body")))
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // another runner
	_, ok = operation.OpenCache(keyed, nil).GetSealed(cache.Component, "k")
	assert.Assert(t, ok, "runs that hold OPM_CACHE_KEY read each other's sealed entries")
	_, err = os.Stat(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "opm"))
	assert.Assert(t, os.IsNotExist(err), "a keyed cache made a key file")

	t.Setenv(operation.EnvCacheDir, "off")
	assert.Assert(t, operation.OpenCache("", nil) == nil)
}
