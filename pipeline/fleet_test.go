package pipeline_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// The review of a fleet reads in the order it rolls out: by wave, each
// environment labelled with its group and wave.
func TestReviewGroupsAFleetByWave(t *testing.T) {
	dir := deploytest.HealthyDir(t, `
environments: zeta: {namespace: "a", group: "staging"}
environments: "prod-b": {namespace: "a", group: "production", rollout: wave: 2}
environments: "prod-a": {namespace: "a", group: "production", rollout: wave: 2}
environments: canary: {namespace: "a", group: "production", rollout: wave: 1}
releases: app: #module: appmodule
`)
	cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseDir: filepath.Join(t.TempDir(), "absent")})
	assert.NilError(t, err)
	var order []string
	for _, r := range cs.Releases {
		order = append(order, r.Environment)
	}
	assert.DeepEqual(t, order, []string{"zeta", "canary", "prod-a", "prod-b"})
	md := report.Markdown(cs, report.MarkdownOptions{})
	for _, label := range []string{"| app | zeta (staging) |", "| app | canary (production, wave 1) |", "| app | prod-a (production, wave 2) |"} {
		assert.Assert(t, strings.Contains(md, label), "%s not in\n%s", label, md)
	}
}

// A group names its environments in a review too.
func TestReviewOfAGroup(t *testing.T) {
	dir := deploytest.HealthyDir(t, `
environments: zeta: {namespace: "a", group: "staging"}
environments: canary: {namespace: "a", group: "production", rollout: wave: 1}
environments: "prod-a": {namespace: "a", group: "production", rollout: wave: 2}
releases: app: #module: appmodule
`)
	for _, sel := range []pipeline.Selection{{Dir: dir, Environment: "production"}, {Dir: dir, Group: "production"}, {Dir: dir, Environment: "zeta,production"}} {
		cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: sel, BaseDir: filepath.Join(t.TempDir(), "absent")})
		assert.NilError(t, err)
		var order []string
		for _, r := range cs.Releases {
			order = append(order, r.Environment)
		}
		want := []string{"canary", "prod-a"}
		if strings.HasPrefix(sel.Environment, "zeta") {
			want = append([]string{"zeta"}, want...)
		}
		assert.DeepEqual(t, order, want)
	}
}

// A review whose renders all come from the cache reads its fleet from the
// environments its fingerprints evaluated (and cached), not from a load:
// it reports in the same rollout order, with the same groups and waves,
// as the review that rendered.
func TestCachedReviewKeepsRolloutOrder(t *testing.T) {
	// No Secret: a release holding one is never cached.
	dir := deploytest.Write(t, map[string]string{"deploy.cue": deploytest.Header + `
environments: zeta: {namespace: "a", group: "staging"}
environments: "prod-b": {namespace: "a", group: "production", rollout: {after: ["canary"]}}
environments: "prod-a": {namespace: "a", group: "production", rollout: wave: 2}
environments: canary: {namespace: "a", group: "production", rollout: {wave: 1, soak: "1m"}}
releases: app: {#module: appmodule, values: withSecret: false}
`})
	opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseDir: filepath.Join(t.TempDir(), "absent"), CacheDir: t.TempDir()}
	cold, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	warm, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	renders, cached := warm.RenderCounts()
	assert.Equal(t, cached, renders, "the second review rendered: %d of %d from the cache", cached, renders)
	var order []string
	for _, r := range warm.Releases {
		order = append(order, fmt.Sprintf("%s %s %d", r.Environment, r.Group, r.Wave))
	}
	assert.DeepEqual(t, order, []string{"zeta staging 0", "canary production 1", "prod-a production 2", "prod-b production 2"})
	want, _ := json.Marshal(cold)
	got, _ := json.Marshal(warm)
	assert.Equal(t, string(got), string(want))
}
