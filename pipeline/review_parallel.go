package pipeline

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/opmodel/pipeline/engine/render"
)

// reviewed is one release × environment of a review.
type reviewed struct {
	rc ReleaseChanges
	ok bool
}

// loadReviewSides loads the head and the base, at the same time when more
// than one render may run at once: each gets its own CUE context, and the
// review cannot start before both are read.
func loadReviewSides(ctx context.Context, opts ReviewOptions) (head, base *reviewSide) {
	loadHead := func() { head = loadReviewSide(ctx, "head", opts.Selection.renderOptions().Dir, true, nil, nil) }
	loadBase := func() { base = loadReviewSide(ctx, "base", opts.BaseDir, false, opts.baseOverlay, nil) }
	if render.Workers(2, opts.Parallelism) < 2 {
		loadHead()
		loadBase()
		return head, base
	}
	var wg sync.WaitGroup
	wg.Go(loadBase)
	loadHead()
	wg.Wait()
	return head, base
}

// loadScannedSides evaluates two scanned sides, at once when more than
// one render may run at once.
func loadScannedSides(ctx context.Context, opts ReviewOptions, head, base *reviewSide) {
	if render.Workers(2, opts.Parallelism) < 2 {
		head.load(ctx)
		base.load(ctx)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { base.load(ctx) })
	head.load(ctx)
	wg.Wait()
}

// reviewAll reviews every environment × release, environments outermost;
// the results are in that order whichever finishes first.
//
// One render at a time, each release is rendered on both sides and
// compared. With more, the renders run first, one goroutine per core, and
// each side's renders are a queue of their own: a goroutine works through
// its home side's queue (the first two use the head and the base already
// loaded, so two cores need no extra load) and then helps with the other,
// loading that side only when it first does. A loaded deployment's CUE
// values must not be evaluated concurrently, so no side is shared. The
// comparisons (plain Go, a tenth of the work: diffs of every modified
// object) follow on as many goroutines.
func reviewAll(ctx context.Context, opts ReviewOptions, head, base *reviewSide, envs, keys []string) ([]reviewed, error) {
	n := len(envs) * len(keys)
	unit := func(i int) (env, key string) { return envs[i/len(keys)], keys[i%len(keys)] }
	out := make([]reviewed, n)
	workers := render.Workers(2*n, opts.Parallelism)
	if workers < 2 {
		for i := range n {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			env, key := unit(i)
			rc, ok := reviewRelease(ctx, opts, head, base, key, env)
			out[i] = reviewed{rc: rc, ok: ok}
		}
		return out, nil
	}

	sides := [2]*reviewSide{head, base}
	dirs := [2]string{opts.Selection.renderOptions().Dir, opts.BaseDir}
	renders := make([][2]sideRender, n)
	var next [2]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var own [2]*reviewSide
			if w < 2 {
				own[w] = sides[w]
			}
			for _, s := range []int{w % 2, 1 - w%2} {
				for {
					i := int(next[s].Add(1) - 1)
					if i >= n || ctx.Err() != nil {
						break
					}
					env, key := unit(i)
					if !worthReviewing(head, base, key, env) {
						continue
					}
					if r, ok := sides[s].cached[unitKey(env, key)]; ok {
						renders[i][s] = sideRender{rel: r}
						continue
					}
					if own[s] == nil {
						own[s] = loadReviewSide(ctx, sides[s].name, dirs[s], s == 0, sides[s].overlay, sides[s].pruned)
						own[s].cache, own[s].fps = sides[s].cache, sides[s].fps
					}
					renders[i][s] = own[s].renderFor(ctx, key, env, opts.Selection)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var cmpNext atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				i := int(cmpNext.Add(1) - 1)
				if i >= n {
					return
				}
				env, key := unit(i)
				if worthReviewing(head, base, key, env) {
					out[i] = reviewed{rc: compareRelease(opts, key, env, renders[i][0], renders[i][1]), ok: true}
				}
			}
		})
	}
	wg.Wait()
	return out, nil
}
