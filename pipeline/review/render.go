// 3. Render the misses: evaluate each side only as far as they reach.

package review

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/workers"
	"github.com/opmodel/pipeline/pipeline/change"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// renderAndCompare renders what the render cache does not hold of the
// pairs reviewed here and compares every pair; the results are in envs ×
// keys order. Sides that were not scanned are loaded whole, and every
// core shares their renders (reviewAll). Scanned sides are evaluated
// pruned to the releases rendered: evaluating a release inside a root of
// a thousand costs three times what it does inside a root of a hundred.
// Up to chunkReleases of them are one chunk whose renders every core
// shares; more are chunks, one per core at a time (reviewChunks), which
// also return the fleet they read (the head's, else the base's, as
// reviewFleet reads it from sides evaluated whole).
func (r *review) renderAndCompare(ctx context.Context, scanned bool, head, base *reviewSide, envs, keys []string) ([]reviewed, *fleet.Fleet, error) {
	if !scanned {
		out, err := r.reviewAll(ctx, head, base, envs, keys)
		return out, nil, err
	}
	rendered := releasesToRender(head, base, envs, keys)
	opts := r.opts
	size := chunkReleases
	if r.opts.Chunk > 0 {
		size = r.opts.Chunk
	}
	if len(rendered) <= size {
		pruneSides(ctx, head, base, envs, keys, rendered)
		loadScannedSides(ctx, opts, head, base)
		out, err := r.reviewAll(ctx, head, base, envs, keys)
		return out, nil, err
	}
	chunks := splitChunks(rendered, size, workers.Count(len(rendered), opts.Parallelism))
	return r.reviewChunks(ctx, head, base, envs, keys, chunks)
}

// reviewChunks reviews many releases in chunks (indexes into keys), one
// chunk per core at a time: a goroutine takes a chunk, evaluates each
// side pruned to the chunk's releases, renders and compares their pairs,
// and takes the next. So no side is evaluated twice, only the chunks in
// progress are held in memory, and no goroutine waits for another before
// the last chunk. The pairs of the other releases, found in the render
// cache on both sides, are compared after.
func (r *review) reviewChunks(ctx context.Context, head, base *reviewSide, envs, keys []string, chunks [][]int) ([]reviewed, *fleet.Fleet, error) {
	out := make([]reviewed, len(envs)*len(keys))
	goroutines := workers.Count(len(chunks), r.opts.Parallelism)
	var mu sync.Mutex
	var fleets [2]*fleet.Fleet // as the head's and the base's chunks read them
	chunked := make([]bool, len(keys))
	for _, c := range chunks {
		for _, k := range c {
			chunked[k] = true
		}
	}
	workers.Run(ctx, goroutines, len(chunks), func(c int) {
		h, b := head.forChunk(keys, chunks[c]), base.forChunk(nil, nil)
		pruneSides(ctx, h, b, envs, keys, chunks[c])
		for e, env := range envs {
			for _, k := range chunks[c] {
				if rc, ok := r.reviewRelease(ctx, h, b, keys[k], env); ok {
					out[e*len(keys)+k] = reviewed{rc: rc, ok: true}
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for i, side := range []*reviewSide{h, b} {
			if fleets[i] == nil {
				fleets[i] = declaredFleet(side.d)
			}
		}
	})
	var cached []int
	for i := range out {
		if env, key := envs[i/len(keys)], keys[i%len(keys)]; !chunked[i%len(keys)] && worthReviewing(head, base, key, env) {
			cached = append(cached, i)
		}
	}
	workers.Run(ctx, goroutines, len(cached), func(j int) {
		i := cached[j]
		rc, ok := r.reviewRelease(ctx, head, base, keys[i%len(keys)], envs[i/len(keys)])
		out[i] = reviewed{rc: rc, ok: ok}
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return out, cmp.Or(fleets[0], fleets[1]), nil
}

// forChunk is a copy of a scanned side to evaluate afresh for one chunk
// of releases (indexes into keys); the head's copy knows the chunk, as
// worthReviewing asks it.
func (s *reviewSide) forChunk(keys []string, chunk []int) *reviewSide {
	c := s.copyToEvaluate()
	c.pruned, c.nothingToRender, c.chunk = nil, false, nil
	if chunk != nil {
		c.chunk = map[string]bool{}
		for _, k := range chunk {
			c.chunk[keys[k]] = true
		}
	}
	return c
}

// copyToEvaluate is a copy of a side that evaluates it afresh when it
// first renders (a loaded deployment's CUE values must not be evaluated
// concurrently); it knows what the side knows.
func (s *reviewSide) copyToEvaluate() *reviewSide {
	c := *s
	c.d, c.session = nil, nil
	return &c
}

// pruneSides limits each scanned side's evaluation to the releases
// (indexes into keys) that it renders: those with a pair reviewed here,
// neither identical nor found in the render cache, that it declares. A
// side with none is not evaluated at all.
func pruneSides(ctx context.Context, head, base *reviewSide, envs, keys []string, releases []int) {
	for _, side := range []*reviewSide{head, base} {
		if !side.present || side.tree == nil {
			continue
		}
		var rendered []string
		for _, k := range releases {
			if slices.ContainsFunc(envs, func(env string) bool {
				return worthReviewing(head, base, keys[k], env) && side.cached[unitKey(env, keys[k])] == nil && side.declares(keys[k], env)
			}) {
				rendered = append(rendered, keys[k])
			}
		}
		if len(rendered) == 0 {
			side.nothingToRender = true
			continue
		}
		side.pruned = side.snap.PrunedTo(ctx, rendered)
	}
}

// loadScannedSides evaluates two scanned sides before a review renders
// them one at a time. With more than one render at once, reviewAll's
// first two workers evaluate their own sides as they start, at the same
// time as each other; when only one side has anything to render (the
// other is all in the render cache), the second worker evaluates its own
// copy of that side meanwhile, instead of after it.
func loadScannedSides(ctx context.Context, opts Options, head, base *reviewSide) {
	if workers.Count(2, opts.Parallelism) < 2 {
		head.load(ctx)
		base.load(ctx)
	}
}

// reviewed is one release × environment of a review.
type reviewed struct {
	rc change.Release
	ok bool
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
func (r *review) reviewAll(ctx context.Context, head, base *reviewSide, envs, keys []string) ([]reviewed, error) {
	n := len(envs) * len(keys)
	unit := func(i int) (env, key string) { return envs[i/len(keys)], keys[i%len(keys)] }
	out := make([]reviewed, n)
	goroutines := workers.Count(2*n, r.opts.Parallelism)
	if goroutines < 2 {
		for i := range n {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			env, key := unit(i)
			rc, ok := r.reviewRelease(ctx, head, base, key, env)
			out[i] = reviewed{rc: rc, ok: ok}
		}
		return out, nil
	}

	sides := [2]*reviewSide{head, base}
	renders := make([][2]sideRender, n)
	var next [2]atomic.Int64
	var wg workers.Group
	// Every goroutine's own copies are made before any starts: a side is
	// written as it loads and renders.
	owns := make([][2]*reviewSide, goroutines)
	for w := range owns {
		for s := range sides {
			if s == w {
				owns[w][s] = sides[s]
			} else {
				owns[w][s] = sides[s].copyToEvaluate()
			}
		}
	}
	for w, own := range owns {
		wg.Go(func() {
			if w < 2 {
				own[w].load(ctx) // see loadScannedSides
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
					renders[i][s] = own[s].renderFor(ctx, key, env, r.opts.Selection)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	workers.Run(ctx, goroutines, n, func(i int) {
		if env, key := unit(i); worthReviewing(head, base, key, env) {
			out[i] = reviewed{rc: r.compareRelease(ctx, key, env, renders[i][0], renders[i][1]), ok: true}
		}
	})
	return out, ctx.Err()
}

// renderOne renders one release of a side in one environment.
func (s *reviewSide) renderOne(ctx context.Context, key, env string, sel operation.Selection) (*render.Release, error) {
	ro := sel.RenderOptions(ctx)
	s.load(ctx)
	if s.err != nil {
		return nil, s.err
	}
	ro.Dir, ro.Environment, ro.Releases, ro.Namespace = s.d.Dir, env, []string{key}, ""
	// One session per loaded deployment (a scanned side loads one per
	// chunk): its renders share each environment's transformers.
	if s.session == nil || s.session.Deployment() != s.d {
		s.session = render.NewSession(s.d)
	}
	rels, err := s.session.Render(ctx, ro)
	if err != nil {
		return nil, err
	}
	if len(rels) != 1 {
		return nil, fmt.Errorf("rendering %s: got %d releases, want 1", key, len(rels))
	}
	return rels[0], nil
}

// sideRender is one side's render of a release in an environment: nil
// and no error when the side does not declare it there.
type sideRender struct {
	rel *render.Release
	err error
}

// renderFor renders release key in env on this side, if it declares it.
func (s *reviewSide) renderFor(ctx context.Context, key, env string, sel operation.Selection) sideRender {
	switch {
	case s.err != nil:
		return sideRender{err: s.err}
	case !s.declares(key, env):
		return sideRender{}
	}
	if r, ok := s.cached[unitKey(env, key)]; ok {
		return sideRender{rel: r}
	}
	start := time.Now()
	r, err := s.renderOne(ctx, key, env, sel)
	if err != nil {
		return sideRender{err: fmt.Errorf("rendering the %s: %w", s.name, err)}
	}
	// A failed write costs the next run a render, nothing else.
	_ = s.cache.Put(s.fps[unitKey(env, key)], r, time.Since(start))
	return sideRender{rel: r}
}

// reviewRelease reviews one release in one environment; ok is false when
// there is nothing to report (see worthReviewing).
func (r *review) reviewRelease(ctx context.Context, head, base *reviewSide, key, env string) (rc change.Release, ok bool) {
	if !worthReviewing(head, base, key, env) {
		return rc, false
	}
	return r.compareRelease(ctx, key, env, head.renderFor(ctx, key, env, r.opts.Selection), base.renderFor(ctx, key, env, r.opts.Selection)), true
}
