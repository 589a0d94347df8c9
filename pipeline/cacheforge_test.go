package pipeline_test

import (
	"path/filepath"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/pipeline"
)

// Someone who can write a shared render cache (a Dagger cache volume, a
// self-hosted runner's disk) but does not hold OPM_CACHE_KEY stores, under
// the fingerprint of a pull request's head, the base's render: a
// well-formed entry whose objects hash to its digest. A review keyed with
// the trusted runs' key reads it as a miss and shows the change; an
// unkeyed review, the control, is fooled into "no change", which is why
// a cache shared with untrusted writers needs the key
// (docs/review-at-scale.md).
func TestForgedRenderCacheEntryIsAMissWithAKey(t *testing.T) {
	for name, key := range map[string][]byte{"keyed": []byte("held-by-trusted-runs-only"), "unkeyed": nil} {
		t.Run(name, func(t *testing.T) {
			cacheDir := t.TempDir()
			t.Setenv("OPM_CACHE_DIR", cacheDir)
			dir := cacheableRepo(t, 1)
			opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir, Environment: "prod"}, BaseRefs: []string{"main"}, CacheKey: key}
			// A trusted run reviews the pull request, filling the cache.
			cs, err := pipeline.Review(t.Context(), opts)
			assert.NilError(t, err)
			assert.Assert(t, changed(cs, "r0"), "the pull request changes r0")

			// The forger renders main and stores it under the head's
			// fingerprint, without the key.
			ex, err := pipeline.Explain(t.Context(), pipeline.Selection{Dir: dir, Environment: "prod", Releases: []string{"r0"}})
			assert.NilError(t, err)
			gitRun(t, dir, "checkout", "-q", "main")
			base, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod", Releases: []string{"r0"}})
			assert.NilError(t, err)
			gitRun(t, dir, "checkout", "-q", "feature")
			forger := rendercache.Open(filepath.Join(cacheDir, "renders"), 0, nil)
			assert.NilError(t, forger.Put(ex[0].Fingerprint, base[0], time.Second))

			cs, err = pipeline.Review(t.Context(), opts)
			assert.NilError(t, err)
			if key != nil {
				assert.Assert(t, changed(cs, "r0"), "a forged entry made the keyed review show no change")
			} else {
				assert.Assert(t, !changed(cs, "r0"), "the control: an unkeyed cache serves what its writers stored")
			}
		})
	}
}

// changed reports whether the review shows the release's render moving.
func changed(cs *pipeline.ChangeSet, name string) bool {
	for _, rc := range cs.Releases {
		if rc.Name == name && (rc.Base == nil || rc.Base.ManifestDigest != rc.Head.ManifestDigest) {
			return true
		}
	}
	return false
}
