package operation

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/userkey"
)

// The one cache (engine/cache) every command reads and writes: renders,
// evaluated environments, identities.
const (
	// EnvCacheDir is where opm keeps its cache (default: opm under the
	// user cache directory); "off" keeps none, as GOCACHE=off does.
	EnvCacheDir = "OPM_CACHE_DIR"
	// EnvCacheKey seals the cache's entries, of every kind, with an HMAC
	// (a secret only trusted runs hold; see ReviewOptions.CacheKey).
	EnvCacheKey = "OPM_CACHE_KEY"
	// EnvCacheMaxBytes bounds the cache (bytes; default 1 GiB).
	EnvCacheMaxBytes = "OPM_CACHE_MAX_BYTES"
)

// OpenCache is the cache in dir ("" for EnvCacheDir or the default),
// sealed with key (nil for EnvCacheKey; empty there too: unkeyed); nil
// when there is none.
func OpenCache(dir string, key []byte) *cache.Cache {
	if dir == "" {
		dir = os.Getenv(EnvCacheDir)
	}
	if dir == "off" {
		return nil
	}
	if dir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return nil
		}
		dir = filepath.Join(d, "opm")
	}
	if key == nil {
		key = []byte(os.Getenv(EnvCacheKey))
	}
	max, _ := strconv.ParseInt(os.Getenv(EnvCacheMaxBytes), 10, 64)
	c := cache.Open(dir, max, key)
	if len(key) == 0 {
		// Sealed entries (what may carry Secret data) need a key that is
		// not in the cache directory: the user's own, beside their other
		// configuration. None to be had: no sealed entries.
		if p := userkey.Path(); p != "" {
			c = c.WithSealKeyFrom(func() []byte {
				k, err := userkey.Read(p)
				if err != nil {
					return nil
				}
				return []byte(k)
			})
		}
	}
	return c
}
