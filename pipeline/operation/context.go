package operation

import (
	"context"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/load"
)

// transformsKey carries the cache an operation's renders keep their
// components' transforms in.
type transformsKey struct{}

// WithTransforms returns ctx whose renders keep their components'
// transforms in c; nil keeps none (--no-skip, --no-cache).
func WithTransforms(ctx context.Context, c *cache.Cache) context.Context {
	return context.WithValue(ctx, transformsKey{}, c)
}

// TransformsOf is the cache ctx's renders keep transforms in: the one
// WithTransforms set, else the user's cache (OPM_CACHE_DIR, OPM_CACHE_KEY).
func TransformsOf(ctx context.Context) *cache.Cache {
	if c, ok := ctx.Value(transformsKey{}).(*cache.Cache); ok {
		return c
	}
	return OpenCache("", nil)
}

// loadsKey carries an operation's load memo in its context.
type loadsKey struct{}

// WithLoads returns ctx carrying a load memo for one operation on one
// environment: its steps (the fast path's identities, the render after
// it) load the deployment once. Never wider than that: a loaded
// deployment is one CUE context, which one goroutine uses at a time, and a
// rollout's environments run in parallel, each with its own.
func WithLoads(ctx context.Context) context.Context {
	return context.WithValue(ctx, loadsKey{}, load.NewMemo())
}

// LoadsOf is the load memo ctx carries, or nil (every render loads).
func LoadsOf(ctx context.Context) *load.Memo {
	m, _ := ctx.Value(loadsKey{}).(*load.Memo)
	return m
}
