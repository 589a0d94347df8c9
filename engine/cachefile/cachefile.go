// Package cachefile writes the entries of opm's local caches (identities
// by fingerprint, evaluated environments) the way Go's build cache does:
// into a temporary file in the cache directory, renamed into place, so a
// reader — another opm running at the same time — sees a whole entry or
// none, never half of one. Readers still verify what they read: a cache
// is an optimisation, and an entry that does not check out is a miss.
package cachefile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write stores b as dir/name, creating dir (private to the user) first.
func Write(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing a cache entry: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		if werr = os.Rename(tmp.Name(), filepath.Join(dir, name)); werr == nil {
			return nil
		}
	}
	_ = os.Remove(tmp.Name())
	if werr == nil {
		werr = cerr
	}
	return fmt.Errorf("writing a cache entry: %w", werr)
}
