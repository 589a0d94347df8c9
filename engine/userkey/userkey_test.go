package userkey

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
)

// The user's key is made once, mode 0600 in a 0700 directory, and read
// back after; runs that make it at once all get the one key, and no
// temporary file is left behind.
func TestReadMakesOneKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "opm", "seal.key")
	keys := make([]string, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = Read(p) })
	}
	wg.Wait()
	for i := range keys {
		assert.NilError(t, errs[i])
		assert.Equal(t, len(keys[i]), 64)
		assert.Equal(t, keys[i], keys[0], "two runs made two keys")
	}
	st, err := os.Stat(p)
	assert.NilError(t, err)
	assert.Equal(t, st.Mode().Perm(), fs.FileMode(0o600))
	st, err = os.Stat(filepath.Dir(p))
	assert.NilError(t, err)
	assert.Equal(t, st.Mode().Perm(), fs.FileMode(0o700))
	again, err := Read(p)
	assert.NilError(t, err)
	assert.Equal(t, again, keys[0])
	left, err := filepath.Glob(filepath.Join(filepath.Dir(p), ".seal.key-*"))
	assert.NilError(t, err)
	assert.Equal(t, len(left), 0, "temporary files left: %v", left)
}
