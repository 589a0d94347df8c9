// Package workers runs units of work on a bounded number of goroutines,
// one per usable core by default: the one pool that renders, reviews and
// render-cache lookups share, so "how many at once" is decided in one
// place.
package workers

import (
	"context"
	"runtime"
	"sync/atomic"
)

// Count is how many goroutines work on n units at once: limit, or one per
// usable core (GOMAXPROCS) when limit < 1; never more than n, at least 1.
func Count(n, limit int) int {
	if limit < 1 {
		limit = runtime.GOMAXPROCS(0)
	}
	return max(1, min(n, limit))
}

// Each runs fn for every i in [0, n) on Count(n, limit) goroutines. CUE values
// of one cue.Context must not be evaluated concurrently, so every goroutine
// first calls setup once for state of its own (its own loaded deployment,
// hence its own CUE context); setup(0) may hand back state the caller
// already has. fn writes its result at index i, so output order is the
// input order whatever finishes first. The error returned is the one of
// the lowest i that failed — what a sequential loop would have returned —
// and units after a failed one are not started. A panic of setup or fn is
// raised again in the caller's goroutine (Group).
func Each[S any](ctx context.Context, limit, n int, setup func(ctx context.Context, worker int) (S, error), fn func(ctx context.Context, s S, i int) error) error {
	workers := Count(n, limit)
	errs := make([]error, n)
	setupErrs := make([]error, workers)
	var next atomic.Int64
	var failedAt atomic.Int64
	failedAt.Store(int64(n))
	var g Group
	for w := range workers {
		g.Go(func() {
			s, err := setup(ctx, w)
			if err != nil {
				setupErrs[w] = err
				return
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= n || int64(i) > failedAt.Load() {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[i] = err
				} else {
					errs[i] = fn(ctx, s, i)
				}
				if errs[i] != nil {
					for {
						cur := failedAt.Load()
						if int64(i) >= cur || failedAt.CompareAndSwap(cur, int64(i)) {
							break
						}
					}
				}
			}
		})
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// A unit no goroutine could take (every setup failed) is a failure too.
	if int(next.Load()) < n {
		for _, err := range setupErrs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Run calls do for every i in [0, n) on workers goroutines, each taking
// the next index when done with one, until ctx ends. do reports its own
// results (at index i): Run has none.
func Run(ctx context.Context, workers, n int, do func(i int)) {
	var next atomic.Int64
	var g Group
	for range max(workers, 1) {
		g.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				do(i)
			}
		})
	}
	g.Wait()
}
