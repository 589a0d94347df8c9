package pipeline_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/internal/deploytest"
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
			forger := rendercache.Open(cacheDir, 0, nil)
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

// forgeEnvironments rewrites every evaluated-environments entry in the
// cache at dir so that environment env declares no values files, sealed as
// anyone who can write the directory can seal it (unkeyed); it returns how
// many entries it rewrote.
func forgeEnvironments(t *testing.T, dir, env string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(b), "opm-cache-v2 environments ") {
			return err
		}
		_, body, _ := strings.Cut(string(b), "\n")
		var e map[string]any
		assert.NilError(t, json.Unmarshal([]byte(body), &e))
		e["files"].(map[string]any)[env] = nil
		forged, err := json.Marshal(e)
		assert.NilError(t, err)
		assert.NilError(t, cache.Open(dir, 0, nil).Put(cache.Environments, e["key"].(string), forged))
		n++
		return nil
	})
	assert.NilError(t, err)
	return n
}

// valuesRepo is a repository whose pull request changes prod's stamp (a
// ConfigMap's data) in prod's values file only.
func valuesRepo(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`environments: prod: {namespace: %q, valuesFiles: ["prod.yaml"]}
releases: app: #module: appmodule
`, ns))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "prod.yaml"), []byte("stamp: \"v1\"\n"), 0o644))
	return pullRequestOf(t, dir, "prod.yaml", `stamp: "v1"`, `stamp: "v2"`)
}

// Someone who can write the cache but holds no key rewrites the evaluated
// environments so that prod declares no values file: the pull request's
// fingerprint would then equal main's, and a review would say "No changes"
// while prod's ConfigMap moves. Under a key the forged entry is never read
// (also by --no-cache, which reads no cache of any kind); the unkeyed
// control shows the attack is real.
func TestForgedEnvironmentsEntryIsAMissWithAKey(t *testing.T) {
	for name, key := range map[string][]byte{"keyed": []byte("held-by-trusted-runs-only"), "unkeyed": nil} {
		t.Run(name, func(t *testing.T) {
			cacheDir := t.TempDir()
			t.Setenv("OPM_CACHE_DIR", cacheDir)
			if key == nil {
				t.Setenv(pipeline.EnvVerifySkips, "") // it would catch the forgery: a run in CI has it off
			}
			dir := valuesRepo(t)
			opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir, Environment: "prod"}, BaseRefs: []string{"main"}, CacheKey: key}
			cs, err := pipeline.Review(t.Context(), opts)
			assert.NilError(t, err)
			assert.Assert(t, changed(cs, "app"), "the pull request changes app")

			assert.Assert(t, forgeEnvironments(t, cacheDir, "prod") > 0, "no environments entry to forge")
			cs, err = pipeline.Review(t.Context(), opts)
			assert.NilError(t, err)
			if key == nil {
				assert.Assert(t, !changed(cs, "app"), "the control: an unkeyed cache serves what its writers stored")
			} else {
				assert.Assert(t, changed(cs, "app"), "a forged environments entry made the keyed review show no change")
			}
			forgeEnvironments(t, cacheDir, "prod")
			noCache := opts
			noCache.NoCache = true
			cs, err = pipeline.Review(t.Context(), noCache)
			assert.NilError(t, err)
			assert.Assert(t, changed(cs, "app"), "--no-cache read a cache")
		})
	}
}

// The same forgery against apply: the environments entry rewritten, main
// applied, the pull request's commit checked out and applied. A keyed apply applies the
// new stamp; the unkeyed control reports it "unchanged (inputs identical)"
// and leaves the old one in place.
func TestForgedEnvironmentsEntryCannotStopAKeyedApply(t *testing.T) {
	for name, key := range map[string]string{"keyed": "held-by-trusted-runs-only", "unkeyed": ""} {
		t.Run(name, func(t *testing.T) {
			cacheDir := t.TempDir()
			t.Setenv("OPM_CACHE_DIR", cacheDir)
			t.Setenv(pipeline.EnvCacheKey, key)
			if key == "" {
				t.Setenv(pipeline.EnvVerifySkips, "")
			}
			dir := valuesRepo(t)
			opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "prod"}, ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}}
			gitRun(t, dir, "checkout", "-q", "main")
			// The forger acts before main's apply: both applies read the
			// environments from the cache.
			_, err := pipeline.Explain(t.Context(), opts.Selection)
			assert.NilError(t, err)
			assert.Assert(t, forgeEnvironments(t, cacheDir, "prod") > 0)
			_, err = pipeline.Apply(t.Context(), opts)
			assert.NilError(t, err)
			gitRun(t, dir, "checkout", "-q", "feature")
			res, err := pipeline.Apply(t.Context(), opts)
			assert.NilError(t, err)
			if key == "" {
				assert.Assert(t, res.Releases[0].InputsIdentical, "the control: the forged entry hid the change")
			} else {
				assert.Assert(t, !res.Releases[0].InputsIdentical, "a forged environments entry made the keyed apply skip")
				assert.Assert(t, res.Releases[0].Counts.Configured > 0, "%+v", res.Releases[0].Counts)
			}
		})
	}
}
