package pipeline_test

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline"
)

func TestCombinedDigestAndChangeID(t *testing.T) {
	one, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples", Environment: "staging", Releases: []string{"blog"}}})
	assert.NilError(t, err)
	assert.Equal(t, one.Digest(), one.Releases[0].ManifestDigest, "one release: its own digest")
	assert.Equal(t, one.ChangeID(), one.Releases[0].ChangeID)
	assert.Equal(t, one.ReleaseID(), one.Releases[0].ReleaseID)

	both, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples", Environment: "staging"}})
	assert.NilError(t, err)
	assert.Check(t, strings.HasPrefix(both.Digest(), "sha256:") && len(both.Digest()) == 71)
	assert.Check(t, both.Digest() != one.Digest())
	assert.Check(t, strings.HasPrefix(both.ChangeID(), "change-sha256-"))
	assert.Equal(t, both.ReleaseID(), "")

	prod, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples", Environment: "production"}})
	assert.NilError(t, err)
	assert.Check(t, prod.Digest() != both.Digest(), "another environment's content differs")
	again, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples", Environment: "staging"}})
	assert.NilError(t, err)
	assert.Equal(t, again.Digest(), both.Digest(), "deterministic")
}

func TestStaleObjectsListsOnlyStale(t *testing.T) {
	cs := &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{{Name: "mc", Objects: []pipeline.ObjectChange{
		{Ref: pipeline.ObjectRef{Group: "apps", Kind: "StatefulSet", Namespace: "ns", Name: "old"}, Action: pipeline.Stale},
		{Ref: pipeline.ObjectRef{Kind: "Service", Namespace: "ns", Name: "new"}, Action: pipeline.Added},
	}}}}
	assert.DeepEqual(t, cs.StaleObjects(), []string{"mc: statefulset.apps/ns/old"})
}
