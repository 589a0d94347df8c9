package report

import (
	"strings"
	"testing"

	"gotest.tools/v3/golden"

	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/pipeline"
)

// The texts a user reads, word for word, for one change set and one
// status and history result holding each case the report distinguishes
// (added, modified with a diff, unchanged, stale, ghost, a warning, an
// error, an unhealthy object, a sealed digest): testdata/*.golden, which
// `go test ./pipeline/report -update` rewrites, so a change to what users
// read shows in review.
func TestReportsAsRead(t *testing.T) {
	cs := &pipeline.ChangeSet{Operation: "review", BaseRef: "main", BaseCommit: "0123456789abcdef0123456789abcdef01234567",
		Releases: []pipeline.ReleaseChanges{
			{Name: "blog", Namespace: "staging", Environment: "staging", ReleaseID: "fca62a8f-94ec-549d-8af3-32673ea379f8",
				Base: &pipeline.Revision{ManifestDigest: "sha256:ed51f6379944eca252db28132440ca6c514c8c3d44851f31dc04f26ae5ada702", ChangeID: "change-sha1-d0a4f314"},
				Head: pipeline.Revision{ManifestDigest: "sha256:0b4ae8d2f1e3c5a79a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071", ChangeID: "change-sha1-7c1e22aa"},
				Objects: []pipeline.ObjectChange{
					{Ref: pipeline.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "staging", Name: "blog-config", Component: "web"}, Action: pipeline.Modified,
						Diff: "--- base/ConfigMap/staging/blog-config\n+++ head/ConfigMap/staging/blog-config\n@@ -1,3 +1,3 @@\n data:\n-  title: Engineering blog\n+  title: Engineering notes\n"},
					{Ref: pipeline.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "staging", Name: "blog", Component: "web"}, Action: pipeline.Unchanged},
					{Ref: pipeline.ObjectRef{Version: "v1", Kind: "Service", Namespace: "staging", Name: "blog-api", Component: "api"}, Action: pipeline.Added},
					{Ref: pipeline.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "staging", Name: "old-flags", Component: "web"}, Action: pipeline.Stale},
				},
				Counts:     pipeline.Counts{Added: 1, Modified: 1, Unchanged: 1, Stale: 1},
				Highlights: []string{"ConfigMap blog-config changes, but Deployment blog, which reads it, will not restart: its pod template does not change (add a checksum annotation of it to the template, or run kubectl rollout restart)"},
				Warnings:   []string{"values.replicas is set to 3, but an autoscaler owns replicas"},
				Reach:      &pipeline.Footprint{Namespaces: []string{"staging"}}, BaseReach: &pipeline.Footprint{Namespaces: []string{"staging"}}},
			{Name: "minecraft", Namespace: "staging", Environment: "staging", ReleaseID: "1b0c9a7e-0000-5000-8000-000000000001",
				Error: `rendering the head: release "minecraft": values.motd: "hello" is not one of the values this field takes: "a", "b"`},
		},
		Counts: pipeline.Counts{Added: 1, Modified: 1, Unchanged: 1, Stale: 1},
	}
	golden.Assert(t, Text(cs, false), "review.text.golden")
	golden.Assert(t, Text(cs, true), "review.colour.golden")
	golden.Assert(t, Markdown(cs, MarkdownOptions{}), "review.md.golden")

	status := &pipeline.StatusResult{Releases: []pipeline.ReleaseStatus{{
		Name: "blog", Namespace: "staging", Environment: "staging", ReleaseID: "fca62a8f-94ec-549d-8af3-32673ea379f8",
		ChangeID: "change-sha1-7c1e22aa", LastTransitionTime: "2026-11-27T03:00:00Z", Discovery: "inventory", Since: "2026-11-27T03:01:00Z",
		Components: []pipeline.ComponentStatus{{Name: "web", Objects: []pipeline.ObjectStatus{
			{ObjectRef: pipeline.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "staging", Name: "blog"}, Health: health.InProgress,
				Reason: `ImagePullBackOff: Back-off pulling image "ghcr.io/example/blog:9.9" (pod blog-5d9f, container web); Available: 0/2`},
			{ObjectRef: pipeline.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "staging", Name: "blog-config"}, Health: health.Current},
		}}},
	}}}
	golden.Assert(t, StatusTable(status), "status.golden")

	history := &pipeline.HistoryResult{Releases: []pipeline.ReleaseHistory{{
		Name: "blog", Namespace: "staging", Environment: "staging", ReleaseID: "fca62a8f-94ec-549d-8af3-32673ea379f8",
		Inventory: "opm.blog.fca62a8f", Cluster: pipeline.ClusterRef{Server: "https://127.0.0.1:6443", Context: "kind-opm"},
		Changes: []pipeline.HistoryEntry{
			{ChangeID: "change-hmac-7c1e22aa", Current: true, Timestamp: "2026-11-27T03:00:00Z", Objects: 4,
				ManifestDigest: "hmac-sha256:0b4ae8d2f1e3c5a79a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"},
			{ChangeID: "change-sha1-d0a4f314", Timestamp: "2026-11-26T12:00:00Z", Objects: 3,
				ManifestDigest: "sha256:ed51f6379944eca252db28132440ca6c514c8c3d44851f31dc04f26ae5ada702"},
		},
	}}}
	table := HistoryTable(history)
	golden.Assert(t, table, "history.golden")
	// The sealed digest (hmac:…, 17 characters) and the plain one (12)
	// share one aligned column.
	lines := strings.Split(table, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "change-") {
			if i, j := strings.Index(l, "hmac:"), strings.Index(lines[len(lines)-2], "ed51f6379944"); i >= 0 && j >= 0 && i != j {
				t.Errorf("digest columns differ: %d and %d\n%s", i, j, table)
			}
		}
	}
}
