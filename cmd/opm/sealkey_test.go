package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/manifest"
)

// OPM_SEAL_KEY wins; without it every run of this user gets the same key,
// private to the user, even when runs race to create it.
func TestSealKeyIsStablePerUser(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	assert.Equal(t, sealKey(func(string) string { return "from-ci" }), "from-ci")
	none := func(string) string { return "" }
	keys := make([]string, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); keys[i] = sealKey(none) }()
	}
	wg.Wait()
	for _, k := range keys {
		assert.Equal(t, k, keys[0])
	}
	assert.Equal(t, len(keys[0]), 64)
	fi, err := os.Stat(filepath.Join(dir, "opm", "seal.key"))
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o600))
	assert.Equal(t, sealKey(none), keys[0])
}

// sealed is how opm prints a change ID of a release holding secret data,
// under the seal key this test run's opm uses (TestMain's config dir).
func sealed(changeID string) string {
	if !strings.HasPrefix(changeID, "change-") {
		return changeID
	}
	return manifest.NewSealer([]byte(sealKey(os.Getenv))).ChangeID(changeID)
}
