package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/opmodel/pipeline/engine/cachefile"
	"github.com/opmodel/pipeline/engine/render"
)

// identityCache keeps rendered releases' identities by input fingerprint,
// as a build cache keeps outputs by action key: equal fingerprints mean
// equal renders, so a hit is exactly the identity a render would give,
// and a re-apply where nothing moved then evaluates no CUE at all. An
// entry is a small JSON file (name, namespace, ids, module, the
// environment's cluster settings; nothing secret) under the user cache
// directory (OPM_CACHE_DIR overrides it). A cache that cannot be read or
// written is no cache: the identities are evaluated.
type identityCache struct{ dir string }

func newIdentityCache() identityCache { return identityCache{dir: cacheDir("identities")} }

// cacheDir is where opm keeps the cache named sub: under OPM_CACHE_DIR,
// else the user cache directory; "" when there is none (no cache).
func cacheDir(sub string) string {
	if d := os.Getenv("OPM_CACHE_DIR"); d != "" {
		return filepath.Join(d, sub)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "opm", sub)
}

// cachedIdentity is what an entry holds: every field of a release that
// an identity-only render sets, so a hit is that render. The reach
// (namespaces the environment allows) is one: without it the fast path's
// check of the recorded entries against the reach allowed everything.
type cachedIdentity struct {
	Key         string         `json:"key"`
	Name        string         `json:"name"`
	Namespace   string         `json:"namespace"`
	Environment string         `json:"environment,omitempty"`
	ReleaseID   string         `json:"releaseId"`
	Module      render.Module  `json:"module"`
	Cluster     render.Cluster `json:"cluster"`
	Reach       *render.Reach  `json:"reach,omitempty"`
}

// identityFormat names the entries' format in their file names: entries of
// an older format (v1 without the reach, v2 with its namespaces under
// "allowed") are never read as this one's.
const identityFormat = "v3-"

func (c identityCache) path(fp string) string {
	return filepath.Join(c.dir, identityFormat+strings.TrimPrefix(fp, "inputs-sha256-")+".json")
}

// get returns the identity of the render with fingerprint fp.
func (c identityCache) get(fp string) (*render.Release, bool) {
	if c.dir == "" || fp == "" {
		return nil, false
	}
	b, err := os.ReadFile(c.path(fp))
	if err != nil {
		return nil, false
	}
	var e cachedIdentity
	if json.Unmarshal(b, &e) != nil || e.ReleaseID == "" {
		return nil, false
	}
	r := &render.Release{Key: e.Key, Name: e.Name, Namespace: e.Namespace, Environment: e.Environment,
		ReleaseID: e.ReleaseID, Module: e.Module, Cluster: e.Cluster, Fingerprint: fp}
	r.Reach = e.Reach
	return r, true
}

// put records r's identity under its fingerprint, atomically.
func (c identityCache) put(r *render.Release) {
	if c.dir == "" || r.Fingerprint == "" {
		return
	}
	b, err := json.Marshal(cachedOf(r))
	if err != nil {
		return
	}
	_ = cachefile.Write(c.dir, filepath.Base(c.path(r.Fingerprint)), b) // no cache is a slower run, not a failure
}

// cachedOf is what the cache keeps of r.
func cachedOf(r *render.Release) cachedIdentity {
	e := cachedIdentity{Key: r.Key, Name: r.Name, Namespace: r.Namespace, Environment: r.Environment,
		ReleaseID: r.ReleaseID, Module: r.Module, Cluster: r.Cluster, Reach: r.Reach}
	return e
}

// verifyIdentities, with OPM_VERIFY_SKIPS set, renders the identities the
// cache served and fails loudly when one differs: the cache would have
// given a wrong answer. Without it, nothing.
func verifyIdentities(ctx context.Context, sel Selection, cached []*render.Release) error {
	if os.Getenv(EnvVerifySkips) == "" {
		return nil
	}
	ro := sel.renderOptions()
	ro.IdentityOnly = true
	rels, err := render.Render(ctx, ro)
	if err != nil {
		return fmt.Errorf("%s: verifying the cached identities: %w", EnvVerifySkips, err)
	}
	if len(rels) != len(cached) {
		return fmt.Errorf("%s: the cache served %d identities, the render has %d", EnvVerifySkips, len(cached), len(rels))
	}
	for i, r := range rels {
		if got, want := cachedOf(cached[i]), cachedOf(r); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s: the cached identity of release %s is %+v, the render's %+v", EnvVerifySkips, r.Key, got, want)
		}
	}
	return nil
}

// all returns the identities of every fingerprint (by release key),
// sorted by key, when the cache has each one; hit is false otherwise.
func (c identityCache) all(fps map[string]string) (out []*render.Release, hit bool) {
	for _, k := range slices.Sorted(maps.Keys(fps)) {
		r, ok := c.get(fps[k])
		if !ok || r.Key != k {
			return nil, false
		}
		out = append(out, r)
	}
	return out, true
}

// identities returns the selected releases' identities, sorted by key:
// from the cache when every one is there, else by evaluating them
// (render's IdentityOnly), which fills the cache.
func identities(ctx context.Context, sel Selection) ([]*render.Release, error) {
	cache := newIdentityCache()
	if out, hit := cache.all(sel.fingerprints); hit {
		return out, nil
	}
	io := sel.renderOptions()
	io.IdentityOnly = true
	ids, err := render.Render(ctx, io)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		id.Fingerprint = sel.fingerprints[id.Key]
		cache.put(id)
	}
	return ids, nil
}
