package render

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// cachedModule is a release of n components: each a Deployment and a
// ConfigMap whose data reads the release's value for it, and one more
// component whose Secret holds a repository value (never stored).
func cachedModule(t *testing.T, n int) string {
	t.Helper()
	var comps strings.Builder
	for i := range n {
		fmt.Fprintf(&comps, `
		c%02d: {
			core.#Workload
			core.#Configs
			spec: {
				workload: {type: "stateless", replicas: 1, container: {image: "nginx:1.27", ports: http: containerPort: 8080}}
				configs: "c%02d": data: v: #config.v["c%02d"]
			}
		}`, i, i, i)
	}
	return deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

releases: r: core.#ModuleRelease & {
	metadata: {name: "r", namespace: "ns"}
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/cached/r@v0", name: "r", version: "0.1.0"}
		#config: {v: [string]: string, password: string}
		#components: {%s
		creds: {
			core.#Secrets
			spec: secrets: "creds": data: password: #config.password
		}
		}
	}
	values: {v: {for i in [%s] {(i): "one"}}, password: "canary-repo-pw-7f3a"}
}
`, comps.String(), quotedNames(n))})
}

func quotedNames(n int) string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%q", fmt.Sprintf("c%02d", i)))
	}
	return strings.Join(out, ", ")
}

// renderCached renders release r of dir with c, and returns it with the
// number of components transformed rather than taken from the cache.
func renderCached(t *testing.T, dir string, c *cache.Cache, verify bool, in ...values.Input) (*Release, int64) {
	t.Helper()
	r, st := renderStats(t, dir, c, verify, in...)
	return r, st.transformed.Load()
}

func renderStats(t *testing.T, dir string, c *cache.Cache, verify bool, in ...values.Input) (*Release, *transformStats) {
	t.Helper()
	st := &transformStats{}
	rels, err := Render(t.Context(), Options{Dir: dir, Values: in, Cache: c, VerifyCache: verify, stats: st})
	assert.NilError(t, err)
	assert.Equal(t, len(rels), 1)
	return rels[0], st
}

func yamlOf(t *testing.T, r *Release) string {
	t.Helper()
	var b strings.Builder
	for _, res := range r.Resources {
		y, err := manifest.YAML(res.Object.Object)
		assert.NilError(t, err)
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

// A render transforms only the components whose inputs moved, and gives
// what a render without the cache gives, byte for byte; a component that
// renders a Secret is never stored, nor is anything of a release with
// secret values.
func TestTransformCacheTransformsWhatChanged(t *testing.T) {
	dir := cachedModule(t, 10)
	c := cache.Open(t.TempDir(), 0, nil)
	same := func(t *testing.T, got *Release, in ...values.Input) {
		t.Helper()
		want, n := renderCached(t, dir, nil, false, in...)
		assert.Equal(t, n, int64(11), "without a cache every component is transformed")
		assert.Equal(t, yamlOf(t, got), yamlOf(t, want))
		assert.Equal(t, got.ManifestDigest, want.ManifestDigest)
		assert.Equal(t, got.ChangeID, want.ChangeID)
		assert.DeepEqual(t, got.Warnings, want.Warnings)
	}

	first, n := renderCached(t, dir, c, false)
	assert.Equal(t, n, int64(11), "a cold cache transforms all")
	same(t, first)
	again, n := renderCached(t, dir, c, false)
	assert.Equal(t, n, int64(1), "warm: only the component with a Secret, which is never stored")
	same(t, again)

	one := values.Input{Name: "one.cue", Data: []byte(`v: c03: "two"`)}
	changed, n := renderCached(t, dir, c, false, one)
	assert.Equal(t, n, int64(2), "one component's value moved: it and the Secret's component")
	same(t, changed, one)
	assert.Assert(t, changed.ManifestDigest != first.ManifestDigest)

	verified, n := renderCached(t, dir, c, true, one)
	assert.Equal(t, n, int64(11), "verifying transforms every hit as well")
	same(t, verified, one)

	// Nothing of the Secret's value is on disk, in any encoding a leak takes.
	for _, leak := range redact.Encodings("canary-repo-pw-7f3a") {
		assert.NilError(t, filepath.WalkDir(c.Dir(), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			assert.NilError(t, err)
			assert.Check(t, !strings.Contains(string(b), leak), "%s holds the Secret's value", path)
			return nil
		}))
	}

	// A release reading a secret value uses no cache at all.
	secret := values.Input{Name: "secret.cue", Data: []byte(`password: "canary-secret-pw-91c2"`), Secret: true}
	_, n = renderCached(t, dir, c, false, secret)
	assert.Equal(t, n, int64(11))
	_, n = renderCached(t, dir, c, false, secret)
	assert.Equal(t, n, int64(11), "nothing was stored for it, nothing is read")
}

// An entry is what a transform gave, or no answer: a rewritten entry
// under an unkeyed cache (which trusts its writers, as Go's build cache
// does) is served — the proof the hit path is taken — and verifying hits
// turns it into an error; under OPM_CACHE_KEY an entry written without
// the key is a miss.
func TestTransformCacheEntriesAreCheckedOnRead(t *testing.T) {
	dir := cachedModule(t, 2)
	forge := func(c *cache.Cache, keys []string) {
		for _, key := range keys {
			body, ok := c.Get(cache.Transform, key)
			assert.Assert(t, ok)
			assert.NilError(t, c.Put(cache.Transform, key, []byte(strings.ReplaceAll(string(body), `"v":"one"`, `"v":"forged"`))))
		}
	}
	c := cache.Open(t.TempDir(), 0, nil)
	_, st := renderStats(t, dir, c, false)
	assert.Equal(t, len(st.written), 2, "the premise: the two ConfigMaps' components were stored")
	forge(c, st.written)
	r, _ := renderCached(t, dir, c, false)
	assert.Check(t, is.Contains(yamlOf(t, r), "v: forged"), "an unkeyed cache serves what its writers wrote")
	_, err := Render(t.Context(), Options{Dir: dir, Cache: c, VerifyCache: true})
	assert.ErrorContains(t, err, "the transform cache's entry")

	keyedDir := t.TempDir()
	k := cache.Open(keyedDir, 0, []byte("the key"))
	_, st = renderStats(t, dir, k, false)
	writer := cache.Open(keyedDir, 0, nil) // a writer without the key
	for _, key := range st.written {
		assert.NilError(t, writer.Put(cache.Transform, key, []byte(`[{"t":"x","o":{}}]`)))
	}
	r, n := renderCached(t, dir, k, false)
	assert.Check(t, !strings.Contains(yamlOf(t, r), "forged"))
	assert.Equal(t, n, int64(3), "entries not sealed with the key are misses")
}

// Differential: generated releases (components of several kinds and
// traits, values moved at random between renders) render with the cache,
// cold and warm, exactly as without it.
func TestTransformCacheRendersAsWithout(t *testing.T) {
	for seed := range 6 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(seed), 62))
			dir := cachedModule(t, 3+rnd.IntN(8))
			c := cache.Open(t.TempDir(), 0, nil)
			for step := range 4 {
				var in []values.Input
				if step > 0 {
					in = append(in, values.Input{Name: "step.cue", Data: []byte(fmt.Sprintf("v: c%02d: %q", rnd.IntN(3), fmt.Sprint(rnd.IntN(3))))})
				}
				got, _ := renderCached(t, dir, c, false, in...)
				want, _ := renderCached(t, dir, nil, false, in...)
				assert.Equal(t, yamlOf(t, got), yamlOf(t, want), "seed %d step %d", seed, step)
				assert.Equal(t, got.ChangeID, want.ChangeID)
			}
		})
	}
}
