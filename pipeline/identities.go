package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// identityCache keeps rendered releases' identities by input fingerprint,
// as a build cache keeps outputs by action key: equal fingerprints mean
// equal renders, so a hit is exactly the identity a render would give,
// and a re-apply where nothing moved then evaluates no release at all. An
// entry (kind cache.Identity of the one cache) holds what locates the
// release — key, name, namespace, ids, module; nothing secret — and never
// what bounds it: the cluster identity it acts as and where it may write
// are read from the deployment directory on every hit (render.PolicyOf),
// and an entry whose namespace that policy could not have rendered is not
// trusted. A cache that cannot be read or written is no cache: the
// identities are evaluated.
type identityCache struct{ c *cache.Cache }

func newIdentityCache() identityCache { return identityCache{c: operation.OpenCache("", nil)} }

// cachedIdentity is what an entry holds: every field of a release that
// an identity-only render sets, but its policy (Cluster, Reach).
type cachedIdentity struct {
	Key         string        `json:"key"`
	Name        string        `json:"name"`
	Namespace   string        `json:"namespace"`
	Environment string        `json:"environment,omitempty"`
	ReleaseID   string        `json:"releaseId"`
	Module      render.Module `json:"module"`
}

// get returns the identity stored under key (identityKeys), without its
// policy.
func (c identityCache) get(key string) (*render.Release, bool) {
	b, ok := c.c.Get(cache.Identity, key)
	if !ok {
		return nil, false
	}
	var e cachedIdentity
	if json.Unmarshal(b, &e) != nil || e.ReleaseID == "" {
		c.c.Forget(cache.Identity, key)
		return nil, false
	}
	return &render.Release{Key: e.Key, Name: e.Name, Namespace: e.Namespace, Environment: e.Environment,
		ReleaseID: e.ReleaseID, Module: e.Module}, true
}

// put records r's identity under key (identityKeys).
func (c identityCache) put(key string, r *render.Release) {
	if c.c == nil || key == "" {
		return
	}
	b, err := json.Marshal(cachedOf(r))
	if err != nil {
		return
	}
	_ = c.c.Put(cache.Identity, key, b) // no cache is a slower run, not a failure
}

// identityKeys are what the identity cache keys the selected releases'
// identities by: their input fingerprints (fps) without the values files
// the command adds (-f, standard input, in-memory ones). Those are merged
// into the values after the deployment is evaluated, never into what
// names, places or bounds a release, so a diff of a values file never seen
// before still finds its release's identity: evaluating it was a third of
// such a diff. nil when the fingerprints cannot be taken.
func identityKeys(ctx context.Context, sel Selection, fps map[string]string) map[string]string {
	if fps == nil || len(sel.ValuesFiles)+len(sel.InlineValues)+len(sel.SecretValues) == 0 {
		return fps
	}
	sel.ValuesFiles, sel.InlineValues, sel.SecretValues = nil, nil, nil
	return fingerprints(ctx, sel)
}

// cachedOf is what the cache keeps of r.
func cachedOf(r *render.Release) cachedIdentity {
	return cachedIdentity{Key: r.Key, Name: r.Name, Namespace: r.Namespace, Environment: r.Environment,
		ReleaseID: r.ReleaseID, Module: r.Module}
}

// served is what a cache hit serves of a release: the entry, and the
// policy read from the directory.
type served struct {
	cachedIdentity
	Cluster render.Cluster
	Reach   *render.Reach
}

func servedOf(r *render.Release) served { return served{cachedOf(r), r.Cluster, r.Reach} }

// errWrongIdentity is what verifyIdentities finds when the cache served an
// identity the render does not give: a fast path fails on it rather than
// falling back to the full one, which would hide it.
var errWrongIdentity = errors.New("the identity cache served an identity the render does not give")

// verifyIdentities, with OPM_VERIFY_SKIPS set, renders the identities the
// cache served and fails loudly when one differs (errWrongIdentity): the
// cache would have given a wrong answer. Without it, nothing.
func verifyIdentities(ctx context.Context, sel Selection, cached []*render.Release) error {
	if os.Getenv(EnvVerifySkips) == "" {
		return nil
	}
	ro := sel.RenderOptions(ctx)
	ro.IdentityOnly = true
	rels, err := render.Render(ctx, ro)
	if err != nil {
		return fmt.Errorf("%s: verifying the cached identities: %w", EnvVerifySkips, err)
	}
	if len(rels) != len(cached) {
		return fmt.Errorf("%s: the cache served %d identities, the render has %d: %w", EnvVerifySkips, len(cached), len(rels), errWrongIdentity)
	}
	for i, r := range rels {
		if got, want := servedOf(cached[i]), servedOf(r); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s: the cached identity of release %s is %+v, the render's %+v: %w", EnvVerifySkips, r.Key, got, want, errWrongIdentity)
		}
	}
	return nil
}

// all returns the identities of every selected release (the keys of fps,
// their input fingerprints), sorted by key, when the cache has each one
// and the environment's policy, evaluated from the directory now, holds
// for each; hit is false otherwise. Each identity's cluster and reach are
// that policy's, its Fingerprint fps'.
func (c identityCache) all(ctx context.Context, sel Selection, fps map[string]string) (out []*render.Release, hit bool) {
	if c.c == nil || len(fps) == 0 {
		return nil, false
	}
	keys := identityKeys(ctx, sel, fps)
	env := sel.Environment
	for _, k := range slices.Sorted(maps.Keys(fps)) {
		r, ok := c.get(keys[k])
		if !ok || r.Key != k || r.Environment != env {
			return nil, false
		}
		r.Fingerprint = fps[k]
		out = append(out, r)
	}
	if env == "" {
		return out, true // no environment: no policy, as a render gives
	}
	p, ok, err := render.PolicyOf(ctx, sel.Dir, env)
	if err != nil || !ok {
		return nil, false // the render decides, and says what is wrong
	}
	for _, r := range out {
		if !p.Holds(r.Namespace) {
			return nil, false
		}
		p.Apply(r)
	}
	return out, true
}

// identities returns the selected releases' identities, sorted by key:
// from the cache when every one is there, else by evaluating them
// (render's IdentityOnly), which fills the cache.
func identities(ctx context.Context, sel Selection, fps map[string]string) ([]*render.Release, error) {
	cache := newIdentityCache()
	if out, hit := cache.all(ctx, sel, fps); hit {
		return out, verifyIdentities(ctx, sel, out)
	}
	io := sel.RenderOptions(ctx)
	io.IdentityOnly = true
	ids, err := render.Render(ctx, io)
	if err != nil {
		return nil, err
	}
	keys := identityKeys(ctx, sel, fps)
	for _, id := range ids {
		id.Fingerprint = fps[id.Key]
		cache.put(keys[id.Key], id)
	}
	_ = cache.c.Trim() // at most hourly: one policy for every kind
	return ids, nil
}
