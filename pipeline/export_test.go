package pipeline

import (
	"context"
	"time"
)

// SetSoakProbe makes a rollout's soak re-check health every interval and
// call probe after each check that passed, so a test can break a wave
// in the middle of its soak.
func SetSoakProbe(o *RolloutOptions, interval time.Duration, probe func()) {
	o.soakInterval, o.soakProbe = interval, probe
}

// SetReviewChunk makes a review render n releases per chunk.
func SetReviewChunk(o *ReviewOptions, n int) { o.chunk = n }

// ReviewPart is ReviewShard without git: a shard of a review of two
// directories (BaseDir), for tests that generate both.
func ReviewPart(ctx context.Context, opts ReviewOptions) (*PartialReview, error) {
	return reviewPart(ctx, opts, "generated")
}
