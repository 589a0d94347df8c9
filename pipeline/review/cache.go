// 2. Look the pairs up in the render cache, by fingerprint.

package review

import (
	"context"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/engine/workers"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// cache is the one cache this review reads and writes: none with
// NoCache (of any kind: renders, environments, identities, transforms).
func (o Options) cache() *cache.Cache {
	if o.NoCache {
		return nil
	}
	return operation.OpenCache(o.CacheDir, o.CacheKey)
}

// transforms is the cache a review's renders keep their components'
// transforms in: none with NoCache or NoSkip.
func (o Options) transforms() *cache.Cache {
	if o.NoSkip {
		return nil
	}
	return o.cache()
}

// reviewCache is the render cache a review reads and writes: none with
// NoCache or NoSkip, or when the sides could not be fingerprinted.
func reviewCache(opts Options, scanned bool) *rendercache.Cache {
	if opts.NoSkip || !scanned {
		return nil
	}
	return rendercache.New(opts.cache())
}

// lookUpRenders finds, for each unit reviewed here, each side's render
// in the cache by the unit's input fingerprint on that side. What is
// found is never rendered; what is not is stored once rendered.
func lookUpRenders(ctx context.Context, opts Options, cache *rendercache.Cache, head, base *reviewSide, envs, keys []string) {
	if cache == nil {
		return
	}
	ro := opts.Selection.RenderOptions(ctx)
	type unit struct {
		side     *reviewSide
		env, key string
		fp       string
		rel      *render.Release
	}
	var units []unit
	for _, side := range []*reviewSide{head, base} {
		if side.tree == nil {
			continue
		}
		side.cache, side.cached, side.fps = cache, map[string]*render.Release{}, map[string]string{}
		for _, env := range envs {
			for _, key := range keys {
				if worthReviewing(head, base, key, env) && side.declares(key, env) {
					units = append(units, unit{side: side, env: env, key: key})
				}
			}
		}
	}
	// Reading and verifying an entry (hash, decode, digest) is work
	// proportional to the pairs, done before anything renders: on every
	// core, as the renders are.
	workers.Run(ctx, workers.Count(len(units), opts.Parallelism), len(units), func(i int) {
		u := &units[i]
		fp, err := u.side.tree.Of(ctx, u.key, fingerprint.Inputs{Environment: u.env, ValuesFiles: ro.ValuesFiles, Values: ro.Values})
		if err != nil {
			return
		}
		u.fp = fp
		if rel, _, ok := cache.Get(fp); ok {
			u.rel = rel
		}
	})
	for _, u := range units {
		if u.fp == "" {
			continue
		}
		k := unitKey(u.env, u.key)
		u.side.fps[k] = u.fp
		if u.rel != nil {
			u.side.cached[k] = u.rel
		}
	}
}

// countRenders counts the renders the pairs reviewed here need, one per
// side that declares the pair, and how many of them the render cache
// holds, as a remote cache reports its hits.
func countRenders(head, base *reviewSide, envs, keys []string) (renders, cached int) {
	for _, env := range envs {
		for _, key := range keys {
			if !worthReviewing(head, base, key, env) {
				continue
			}
			for _, side := range []*reviewSide{head, base} {
				if !side.declares(key, env) {
					continue
				}
				renders++
				if side.cached[unitKey(env, key)] != nil {
					cached++
				}
			}
		}
	}
	return renders, cached
}
