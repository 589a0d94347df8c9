package pipeline

import (
	"context"
	"path/filepath"
	"time"
)

// SetSoakProbe makes a rollout's soak re-check health every interval and
// call probe after each check that passed, so a test can break a wave
// in the middle of its soak.
func SetSoakProbe(o *RolloutOptions, interval time.Duration, probe func()) {
	o.soakInterval, o.soakProbe = interval, probe
}

// ReviewInChunks is Review rendering n releases per chunk.
func ReviewInChunks(ctx context.Context, opts ReviewOptions, n int) (*ChangeSet, error) {
	r, err := openReview(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.chunk = n
	return r.run(ctx)
}

// ReviewPart is ReviewShard without git: a shard of a review of two
// directories (BaseDir), for tests that generate both.
func ReviewPart(ctx context.Context, opts ReviewOptions) (*PartialReview, error) {
	return reviewPart(ctx, opts, "generated")
}

// IdentityEntry is the identity cache's file name for an input fingerprint.
func IdentityEntry(inputs string) string { return filepath.Base(identityCache{}.path(inputs)) }
