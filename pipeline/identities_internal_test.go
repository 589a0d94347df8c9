package pipeline

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/render"
)

// A cached identity is the identity-only render it stands for, reach
// included (namespaces allowed, cluster scope, whether the environment set
// them): the fast path and status judge recorded entries against it.
func TestCachedIdentityKeepsTheReach(t *testing.T) {
	c := identityCache{dir: t.TempDir()}
	want := &render.Release{Key: "app", Name: "app", Namespace: "team-a-web", Environment: "prod", ReleaseID: "id-1",
		Fingerprint: "inputs-sha256-abc", Reach: &render.Reach{Reach: inventory.Reach{Namespaces: []string{"team-a-*"}, ClusterScoped: true}, Environment: "prod", Explicit: true}}
	c.put(want)
	got, ok := c.get(want.Fingerprint)
	assert.Assert(t, ok)
	assert.DeepEqual(t, got.Reach, want.Reach)
	assert.Equal(t, got.ReleaseID, want.ReleaseID)

	noReach := *want
	noReach.Fingerprint, noReach.Reach = "inputs-sha256-def", nil
	c.put(&noReach)
	got, ok = c.get(noReach.Fingerprint)
	assert.Assert(t, ok)
	assert.Assert(t, got.Reach == nil, "no environment, no reach: allowed everywhere, as rendered")
}
