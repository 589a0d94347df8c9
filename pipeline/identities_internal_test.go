package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// A cached identity is where a release is, never what bounds it: a hit
// gets the cluster identity and the reach of the environment as the
// directory declares it now, and an entry the environment could not have
// rendered (another namespace, another environment, an environment no
// longer declared) is a miss, however well it is sealed.
func TestCachedIdentityTakesItsPolicyFromTheDirectory(t *testing.T) {
	dir := deploytest.HealthyDir(t, `environments: prod: {
	namespace: "team-a-web"
	namespaces: allowed: ["team-a-*"]
	cluster: impersonate: serviceAccount: "team-a/deployer"
}
releases: app: #module: appmodule
`)
	rendered, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod", IdentityOnly: true})
	assert.NilError(t, err)
	want := rendered[0]
	want.Fingerprint = "inputs-sha256-abc"

	c := identityCache{c: cache.Open(t.TempDir(), 0, nil)}
	prod := Selection{Dir: dir, Environment: "prod"}
	c.put(want.Fingerprint, want)
	got, hit := c.all(t.Context(), prod, map[string]string{"app": want.Fingerprint})
	assert.Assert(t, hit)
	assert.Assert(t, reflect.DeepEqual(servedOf(got[0]), servedOf(want)), "served %+v, rendered %+v", servedOf(got[0]), servedOf(want))
	assert.Equal(t, got[0].Cluster.ImpersonateUser, "system:serviceaccount:team-a:deployer")

	for what, forge := range map[string]func(r *render.Release){
		"another namespace":   func(r *render.Release) { r.Namespace = "kube-system" },
		"another environment": func(r *render.Release) { r.Environment = "dev" },
		"another key":         func(r *render.Release) { r.Key = "other" },
	} {
		forged := *want
		forge(&forged)
		c.put(want.Fingerprint, &forged)
		_, hit := c.all(t.Context(), prod, map[string]string{"app": want.Fingerprint})
		assert.Assert(t, !hit, "%s: a forged identity was served", what)
	}
	c.put(want.Fingerprint, want)
	_, hit = c.all(t.Context(), Selection{Dir: dir, Environment: "staging"}, map[string]string{"app": want.Fingerprint})
	assert.Assert(t, !hit, "an identity of another environment was served")
}

// No cache of any kind: OPM_CACHE_DIR=off for every command (a review's
// --no-cache and key: pipeline/review's TestReviewOpensTheOneCache).
func TestOneCacheIsOpenedOneWay(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvCacheDir, dir)
	t.Setenv(EnvCacheKey, "")
	c := operation.OpenCache("", nil)
	assert.Equal(t, c.Dir(), dir)
	assert.Assert(t, !c.Keyed())
	t.Setenv(EnvCacheKey, "from-the-environment")
	assert.Assert(t, operation.OpenCache("", nil).Keyed())
	t.Setenv(EnvCacheDir, "off")
	assert.Assert(t, operation.OpenCache("", nil) == nil)
	assert.Assert(t, newIdentityCache().c == nil)
}

// A values file given on the command line is merged into the values after
// the deployment is evaluated, so it never names, places or bounds a
// release: the identity of a diff of a values file never seen before comes
// from the cache. Shown the way it would break: the second values file does
// not even parse, so evaluating the identity would fail — the hit must not
// evaluate it — while the release's input fingerprint (what a skip and a
// change record) still moves with it. With OPM_VERIFY_SKIPS, a hit is
// rendered again, and a forged entry under the same key fails loudly.
func TestANewValuesFileNeedsNoNewIdentity(t *testing.T) {
	dir := deploytest.HealthyDir(t, `environments: prod: {namespace: "web"}
releases: app: #module: appmodule
`)
	t.Setenv(EnvCacheDir, t.TempDir())
	t.Setenv(EnvVerifySkips, "")
	files := t.TempDir()
	good, broken := filepath.Join(files, "good.yaml"), filepath.Join(files, "broken.yaml")
	assert.NilError(t, os.WriteFile(good, []byte("replicas: 2\n"), 0o600))
	assert.NilError(t, os.WriteFile(broken, []byte("replicas: [\n"), 0o600))
	ctx := WithSession(t.Context())
	first := Selection{Dir: dir, Environment: "prod", ValuesFiles: []string{good}}
	fps := fingerprints(ctx, first)
	want, err := identities(ctx, first, fps)
	assert.NilError(t, err)
	assert.Equal(t, want[0].Fingerprint, fps["app"])

	second := Selection{Dir: dir, Environment: "prod", ValuesFiles: []string{broken}}
	_, err = render.Render(ctx, render.Options{Dir: dir, Environment: "prod", ValuesFiles: second.ValuesFiles, IdentityOnly: true})
	assert.Assert(t, err != nil, "evaluating the identity with the broken values file must fail, or this test shows nothing")
	fps2 := fingerprints(ctx, second)
	assert.Assert(t, fps2["app"] != fps["app"], "the values file is an input of the release")
	got, err := identities(ctx, second, fps2)
	assert.NilError(t, err, "the identity was evaluated again")
	assert.Assert(t, reflect.DeepEqual(servedOf(got[0]), servedOf(want[0])), "served %+v, evaluated %+v", servedOf(got[0]), servedOf(want[0]))
	assert.Equal(t, got[0].Fingerprint, fps2["app"])
	assert.DeepEqual(t, identityKeys(ctx, second, fps2), identityKeys(ctx, first, fps))

	// Verified, the hit is rendered: the broken file fails that render,
	// which is not a wrong identity.
	t.Setenv(EnvVerifySkips, "1")
	_, err = identities(ctx, second, fps2)
	assert.Assert(t, err != nil && !errors.Is(err, errWrongIdentity), "%v", err)
	forged := *want[0]
	forged.ReleaseID = "00000000-0000-5000-8000-000000000000"
	newIdentityCache().put(identityKeys(ctx, first, fps)["app"], &forged)
	_, err = identities(ctx, first, fps)
	assert.ErrorIs(t, err, errWrongIdentity)
}

// The promise above, across every example and environment: an identity
// evaluated with a values file is the one evaluated without.
func TestIdentitiesAreTheSameWithAValuesFile(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	assert.NilError(t, os.WriteFile(values, []byte("replicas: 3\nimage: {tag: \"9.9\"}\nnamespace: elsewhere\n"), 0o600))
	checked := 0
	for _, dir := range []string{"../examples", "../examples/shop"} {
		for _, env := range []string{"", "staging", "production"} {
			without, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: env, IdentityOnly: true})
			if err != nil {
				continue // an environment that directory does not declare
			}
			for _, r := range without {
				with, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: env, Releases: []string{r.Key}, ValuesFiles: []string{values}, IdentityOnly: true})
				assert.NilError(t, err)
				assert.Assert(t, reflect.DeepEqual(servedOf(with[0]), servedOf(r)), "%s in %q: with the values file %+v, without %+v", r.Key, env, servedOf(with[0]), servedOf(r))
				checked++
			}
		}
	}
	assert.Assert(t, checked >= 4, "only %d identities compared", checked)
}
