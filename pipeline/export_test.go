package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/pipeline/review"
)

// SetSoakProbe makes a rollout's soak re-check health every interval and
// call probe after each check that passed, so a test can break a wave
// in the middle of its soak.
func SetSoakProbe(o *RolloutOptions, interval time.Duration, probe func()) {
	o.soakInterval, o.soakProbe = interval, probe
}

// ReviewInChunks is Review rendering n releases per chunk.
func ReviewInChunks(ctx context.Context, opts ReviewOptions, n int) (*ChangeSet, error) {
	opts.Chunk = n
	return review.Run(ctx, opts)
}

// ReviewPart is ReviewShard without git: a shard of a review of two
// directories (BaseDir), for tests that generate both.
func ReviewPart(ctx context.Context, opts ReviewOptions) (*PartialReview, error) {
	return review.RunPart(ctx, opts, "generated")
}

// CachedIdentity is the body of the unkeyed identity entry in the cache
// at dir for an input fingerprint.
func CachedIdentity(dir, inputs string) (string, bool) {
	b, ok := cache.Open(dir, 0, nil).Get(cache.Identity, inputs)
	return string(b), ok
}

// ForgeIdentity stores body as the unkeyed identity entry for inputs, as
// anyone who can write the cache directory can.
func ForgeIdentity(dir, inputs, body string) error {
	return cache.Open(dir, 0, nil).Put(cache.Identity, inputs, []byte(body))
}

// CachedRenders counts the render entries in the cache at dir, by the
// kind their seal line names.
func CachedRenders(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), "opm-cache-v2 "+string(cache.Render)+" ") {
			n++
		}
		return nil
	})
	return n
}

// Dialed is how many clusters the session in ctx connected to.
func Dialed(ctx context.Context) int {
	s := ctx.Value(sessionKey{}).(*session)
	s.connections.mu.Lock()
	defer s.connections.mu.Unlock()
	return s.connections.dialed
}
