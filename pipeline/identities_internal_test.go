package pipeline

import (
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
	c.put(want)
	got, hit := c.all(t.Context(), dir, "prod", map[string]string{"app": want.Fingerprint})
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
		c.put(&forged)
		_, hit := c.all(t.Context(), dir, "prod", map[string]string{"app": want.Fingerprint})
		assert.Assert(t, !hit, "%s: a forged identity was served", what)
	}
	c.put(want)
	_, hit = c.all(t.Context(), dir, "staging", map[string]string{"app": want.Fingerprint})
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
