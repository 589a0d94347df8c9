package pipeline

import (
	"context"

	"github.com/opmodel/pipeline/engine/render"
)

// reviewed is one release × environment of a review.
type reviewed struct {
	rc ReleaseChanges
	ok bool
}

// reviewSides is one goroutine's own copy of both sides: a loaded
// deployment's CUE values must not be evaluated concurrently.
type reviewSides struct{ head, base *reviewSide }

// reviewAll reviews every environment × release, environments outermost,
// on one goroutine per core; the results are in that order whichever
// finishes first. Only the first goroutine uses the sides already loaded;
// every other loads both directories again.
func reviewAll(ctx context.Context, opts ReviewOptions, head, base *reviewSide, envs, keys []string) ([]reviewed, error) {
	out := make([]reviewed, len(envs)*len(keys))
	err := render.Each(ctx, opts.Parallelism, len(out), func(ctx context.Context, worker int) (reviewSides, error) {
		if worker == 0 {
			return reviewSides{head, base}, nil
		}
		return reviewSides{
			head: loadReviewSide(ctx, "head", opts.Selection.renderOptions().Dir, true),
			base: loadReviewSide(ctx, "base", opts.BaseDir, false),
		}, nil
	}, func(ctx context.Context, s reviewSides, i int) error {
		env, key := envs[i/len(keys)], keys[i%len(keys)]
		rc, ok := reviewRelease(ctx, opts, s.head, s.base, key, env)
		out[i] = reviewed{rc: rc, ok: ok}
		return nil
	})
	return out, err
}
