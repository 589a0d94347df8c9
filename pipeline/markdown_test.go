package pipeline_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/golden"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// checkBalanced fails unless every code fence is closed and every
// <details> outside code is closed, in order.
func checkBalanced(t *testing.T, md string) {
	t.Helper()
	fence, depth := "", 0
	for i, line := range strings.Split(md, "\n") {
		if fence != "" {
			if strings.TrimRight(line, " ") != "" && strings.Trim(line, "`") == "" && len(line) >= len(fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			fence = line[:len(line)-len(strings.TrimLeft(line, "`"))]
			continue
		}
		depth += strings.Count(line, "<details>")
		depth -= strings.Count(line, "</details>")
		assert.Assert(t, depth >= 0, "line %d closes a <details> that is not open", i+1)
	}
	assert.Equal(t, fence, "", "a code fence is left open")
	assert.Equal(t, depth, 0, "a <details> is left open")
}

// stableMasks numbers Secret markers by first appearance: their keys are
// random per run, but equal values must still show equal markers.
func stableMasks(s string) string {
	seen := map[string]string{}
	return regexp.MustCompile(`\(masked, hmac:[0-9a-f]{12}\)`).ReplaceAllStringFunc(s, func(m string) string {
		if _, ok := seen[m]; !ok {
			seen[m] = fmt.Sprintf("(masked, hmac:<%d>)", len(seen)+1)
		}
		return seen[m]
	})
}

func TestMarkdownGolden(t *testing.T) {
	for _, tc := range []struct {
		name           string
		baseEdit, edit func(string)
		opts           pipeline.ReviewOptions
	}{
		{name: "rename", edit: renameMinecraft(t)},
		{name: "component-rename", edit: moveSettings(t), opts: pipeline.ReviewOptions{Environments: []string{"production"}}},
		{name: "no-change"},
		{
			name: "secret-change", baseEdit: blogSecret(reviewOldPassword),
			edit: func(dir string) { reviewEdit(t, dir, "modules/blog/blog.cue", reviewOldPassword, reviewNewPassword) },
			opts: pipeline.ReviewOptions{Environments: []string{"staging"}, Selection: pipeline.Selection{Releases: []string{"blog"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, head := reviewDirs(t, tc.baseEdit, tc.edit)
			cs := review(t, base, head, tc.opts)
			md := report.Markdown(cs, report.MarkdownOptions{Marker: "<!-- opm:pr-review:test -->"})
			checkBalanced(t, md)
			for _, s := range reviewSecretMaterial() {
				assert.Assert(t, !strings.Contains(md, s), "secret material %q in the Markdown", s)
			}
			golden.Assert(t, stableMasks(md), "review/"+tc.name+".md")
			assert.Equal(t, md, report.Markdown(cs, report.MarkdownOptions{Marker: "<!-- opm:pr-review:test -->"}), "deterministic")
		})
	}
}

func TestMarkdownStatesNoChanges(t *testing.T) {
	cs := &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{{
		Name: "blog", Namespace: "staging", Environment: "staging",
		Base:    &pipeline.Revision{ManifestDigest: "sha256:0123456789abcdef", ChangeID: "change-sha1-aaaaaaaa"},
		Head:    pipeline.Revision{ManifestDigest: "sha256:0123456789abcdef", ChangeID: "change-sha1-aaaaaaaa"},
		Objects: []pipeline.ObjectChange{{Ref: pipeline.ObjectRef{Kind: "Service", Name: "web"}, Action: pipeline.Unchanged}},
		Counts:  pipeline.Counts{Unchanged: 1},
	}}, Counts: pipeline.Counts{Unchanged: 1}}
	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Assert(t, is.Contains(md, "**No changes.**"))
	assert.Assert(t, is.Contains(md, "`change-sha1-aaaaaaaa` (same)"))
	assert.Assert(t, is.Contains(md, "`0123456789ab` (same)"), "digests are shortened to 12 hex characters")
	assert.Assert(t, !strings.Contains(md, "<details>"), "nothing to expand")

	empty := report.Markdown((&pipeline.ChangeSet{}), report.MarkdownOptions{})
	assert.Assert(t, is.Contains(empty, "**No changes.**"))
}

func TestMarkdownErrorsGhostsAndLabels(t *testing.T) {
	cs := &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{
		{Name: "blog", Namespace: "production", Environment: "production", Error: "selecting the cluster: context \"production\" is not in the kubeconfig\n  more detail <here>"},
		{
			Name: "minecraft", Namespace: "staging", Environment: "staging",
			Head: pipeline.Revision{ManifestDigest: "sha256:ffffffffffffffff", ChangeID: "change-sha1-bbbbbbbb"},
			Objects: []pipeline.ObjectChange{
				{Ref: pipeline.ObjectRef{Kind: "Deployment", Namespace: "staging", Name: "leftover"}, Action: pipeline.Ghost},
				{Ref: pipeline.ObjectRef{Kind: "ConfigMap", Namespace: "staging", Name: "odd"}, Action: pipeline.Modified, Diff: "--- a\n+++ b\n@@ -1 +1 @@\n-x: ```\n+x: ````\n"},
			},
			Counts: pipeline.Counts{Ghost: 1, Modified: 1},
		},
	}, Counts: pipeline.Counts{Ghost: 1, Modified: 1}}
	md := report.Markdown(cs, report.MarkdownOptions{Title: "opm diff", BaseLabel: "live", HeadLabel: "render"})
	checkBalanced(t, md)
	assert.Assert(t, strings.HasPrefix(md, "## opm diff: production, staging\n"))
	assert.Assert(t, is.Contains(md, "| blog | production | production | | | | ❌ error |"))
	assert.Assert(t, is.Contains(md, "❌ **blog** (production) could not be compared: selecting the cluster"))
	assert.Assert(t, is.Contains(md, "more detail <here>"), "the full error is in a code block")
	assert.Assert(t, is.Contains(md, "👻 **minecraft** (staging): ghost `Deployment staging/leftover`"))

	assert.Assert(t, is.Contains(md, "Change ID (live → render)"))
	assert.Assert(t, is.Contains(md, "— → `change-sha1-bbbbbbbb`"), "no base revision")
	assert.Assert(t, is.Contains(md, "\n`````diff\n"), "the fence is longer than any backtick run in the diff")

	// A ghost the release's warnings already name is not repeated.
	cs.Releases[1].Warnings = []string{"ghost Deployment/staging/leftover: carries this release's labels"}
	md = report.Markdown(cs, report.MarkdownOptions{})
	assert.Assert(t, !strings.Contains(md, "👻 **minecraft**"), md)
	assert.Equal(t, strings.Count(md, "Deployment/staging/leftover"), 1)
}

// bigConfigMap returns a ConfigMap whose data has n lines of about 50
// bytes, each made unique by tag.
func bigConfigMap(n int, tag string) *unstructured.Unstructured {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %07d of the %s version of a very large file\n", i, tag)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "big", "namespace": "staging"},
		"data":     map[string]any{"file": b.String()},
	}}
}

func changeSetWith(t *testing.T, objs ...[2]*unstructured.Unstructured) *pipeline.ChangeSet {
	t.Helper()
	r := pipeline.ReleaseChanges{Name: "blog", Namespace: "staging", Environment: "staging", Head: pipeline.Revision{ChangeID: "change-sha1-11111111"}}
	for _, pair := range objs {
		d, err := diff.Unified(pair[0], pair[1], diff.Options{})
		assert.NilError(t, err)
		o := pair[1]
		if o == nil {
			o = pair[0]
		}
		ch := pipeline.Modified
		if pair[0] == nil {
			ch = pipeline.Added
		}
		r.Objects = append(r.Objects, pipeline.ObjectChange{Ref: pipeline.ObjectRef{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}, Action: ch, Diff: d})
		r.Counts.Add(ch)
	}
	return &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{r}, Counts: r.Counts}
}

func TestMarkdownCutsTheLargestDiffFirst(t *testing.T) {
	big := [2]*unstructured.Unstructured{bigConfigMap(20000, "old"), bigConfigMap(20000, "new")}
	small := [2]*unstructured.Unstructured{nil, bigConfigMap(3, "small")}
	small[1].SetName("small")
	cs := changeSetWith(t, big, small)
	diffLen := len(cs.Releases[0].Objects[0].Diff)
	assert.Assert(t, diffLen > 2<<20, "the test needs a diff over 2 MB, got %d", diffLen)

	md := report.Markdown(cs, report.MarkdownOptions{Marker: "<!-- m -->", SummaryURL: "https://example.com/run/1"})
	t.Logf("diff %d bytes → comment %d bytes", diffLen, len(md))
	assert.Assert(t, len(md) <= report.DefaultMarkdownLimit, "%d bytes", len(md))
	assert.Assert(t, len(md) > report.DefaultMarkdownLimit-4096, "the budget is used, not thrown away: %d", len(md))
	checkBalanced(t, md)
	assert.Assert(t, strings.HasPrefix(md, "<!-- m -->\n"))
	assert.Assert(t, strings.Contains(md, "1 diff shortened or left out"), "missing %q", "1 diff shortened or left out")
	assert.Assert(t, strings.Contains(md, "[job summary](https://example.com/run/1)"), "missing %q", "[job summary](https://example.com/run/1)")
	assert.Assert(t, regexp.MustCompile(`_✂️ [0-9]+ lines of this diff cut \([0-9.]+ MiB\)\._`).MatchString(md), "no cut note")
	// The small diff survives whole; the big one keeps its beginning.
	assert.Assert(t, is.Contains(cs.Releases[0].Objects[1].Diff, "line 0000002 of the small version"))
	assert.Assert(t, strings.Contains(md, "line 0000002 of the small version"), "missing %q", "line 0000002 of the small version")
	assert.Assert(t, strings.Contains(md, "-    line 0000000 of the old version"), "missing %q", "-    line 0000000 of the old version")

	// Without a limit nothing is cut.
	full := report.Markdown(cs, report.MarkdownOptions{Limit: -1})
	assert.Assert(t, len(full) > diffLen)
	assert.Assert(t, !strings.Contains(full, "✂️"))
	checkBalanced(t, full)

	// A summary-sized limit keeps more.
	mib := report.Markdown(cs, report.MarkdownOptions{Limit: 1 << 20, CutHint: "Run opm locally."})
	assert.Assert(t, len(mib) <= 1<<20 && len(mib) > 1<<19)
	assert.Assert(t, strings.Contains(mib, "Run opm locally."), "missing %q", "Run opm locally.")
	checkBalanced(t, mib)
}

func TestMarkdownCollapsesReleasesWhenDiffsAreNotEnough(t *testing.T) {
	cs := &pipeline.ChangeSet{}
	for i := range 400 {
		r := pipeline.ReleaseChanges{Name: fmt.Sprintf("release-%03d", i), Namespace: "ns", Environment: "staging"}
		for j := range 5 {
			r.Objects = append(r.Objects, pipeline.ObjectChange{
				Ref:    pipeline.ObjectRef{Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("cm-%d", j)},
				Action: pipeline.Stale, Diff: "-a: b\n", Warning: "a note",
			})
			r.Counts.Add(pipeline.Stale)
		}
		cs.Releases = append(cs.Releases, r)
		cs.Counts.Stale += r.Counts.Stale
	}
	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Assert(t, len(md) <= report.DefaultMarkdownLimit, "%d", len(md))
	checkBalanced(t, md)
	assert.Assert(t, strings.Contains(md, "releases' details left out"), "missing %q", "releases' details left out")
	// 400 releases: totals by environment and kind, then the most
	// significant releases (here all alike: the first 50).
	assert.Assert(t, strings.Contains(md, "| staging | 400 | 0 | 0 | 2000 | 0 |"), "the summary by environment")
	assert.Assert(t, strings.Contains(md, "| ConfigMap | 0 | 0 | 2000 |"), "the summary by kind")
	assert.Assert(t, strings.Contains(md, "The 50 most significant of 400 releases"))
	assert.Assert(t, strings.Contains(md, "| release-049 |") && !strings.Contains(md, "| release-050 |"))
}

// At scale the most significant releases are listed and keep their
// details: an error, then the release that prunes, before the many
// that change one object.
func TestMarkdownAtScaleShowsTheMostSignificantFirst(t *testing.T) {
	cs := &pipeline.ChangeSet{}
	for i := range 300 {
		r := pipeline.ReleaseChanges{Name: fmt.Sprintf("release-%03d", i), Namespace: "ns", Environment: []string{"dev", "prod"}[i%2]}
		change := pipeline.Modified
		switch i {
		case 200:
			change = pipeline.Stale
		case 250:
			r.Error = "rendering the head: something broke"
		}
		if r.Error == "" {
			r.Objects = append(r.Objects, pipeline.ObjectChange{Ref: pipeline.ObjectRef{Kind: "Deployment", Namespace: "ns", Name: "web"}, Action: change,
				Diff: strings.Repeat("-a: b\n+a: c\n", 300)})
			r.Counts.Add(change)
		}
		cs.Releases = append(cs.Releases, r)
		cs.Counts.AddAll(r.Counts)
	}
	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Assert(t, len(md) <= report.DefaultMarkdownLimit)
	checkBalanced(t, md)
	assert.Check(t, strings.Contains(md, "| dev | 150 |"), "by environment")
	assert.Check(t, strings.Contains(md, "| Deployment | 0 | 298 | 1 |"), "by kind")
	assert.Check(t, strings.Contains(md, "| release-250 |"), "the error is listed")
	assert.Check(t, strings.Contains(md, "| release-200 |"), "the prune is listed")
	assert.Check(t, strings.Contains(md, "<b>release-200</b>"), "the prune keeps its details")
}

func TestMarkdownHardCutStillCloses(t *testing.T) {
	cs := &pipeline.ChangeSet{}
	for i := range 3000 {
		cs.Releases = append(cs.Releases, pipeline.ReleaseChanges{
			Name: fmt.Sprintf("release-%04d", i), Namespace: "ns", Environment: "staging",
			Warnings: []string{strings.Repeat("a long warning ", 5)},
		})
	}
	for _, limit := range []int{report.DefaultMarkdownLimit, 10000} {
		md := report.Markdown(cs, report.MarkdownOptions{Limit: limit})
		assert.Assert(t, len(md) <= limit, "%d > %d", len(md), limit)
		checkBalanced(t, md)
		assert.Assert(t, strings.Contains(md, "The rest of this review was cut"), "missing %q", "The rest of this review was cut")
	}
}

// The footer (which opm wrote this) ends the document and counts in the
// limit, however much had to be cut.
func TestMarkdownFooterIsLastAndCounted(t *testing.T) {
	const footer = "<sub>opm v1.2.3 · CUE v0.17.1</sub>"
	small := &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{{Name: "a", Namespace: "ns"}}}
	md := report.Markdown(small, report.MarkdownOptions{Footer: footer})
	assert.Equal(t, md, report.Markdown(small, report.MarkdownOptions{})+"\n"+footer+"\n")

	big := &pipeline.ChangeSet{}
	for i := range 3000 {
		big.Releases = append(big.Releases, pipeline.ReleaseChanges{
			Name: fmt.Sprintf("release-%04d", i), Namespace: "ns", Warnings: []string{strings.Repeat("a long warning ", 5)},
		})
	}
	for _, limit := range []int{0, 10000} {
		md := report.Markdown(big, report.MarkdownOptions{Limit: limit, Footer: footer})
		want := limit
		if limit == 0 {
			want = report.DefaultMarkdownLimit
		}
		assert.Assert(t, len(md) <= want, "%d bytes over %d", len(md), want)
		assert.Assert(t, strings.HasSuffix(md, "\n"+footer+"\n"))
		checkBalanced(t, md)
	}
}

// A drift summary per environment: the worst state of its releases wins,
// and an unreachable environment is never "in sync".
func TestDriftPerEnvironment(t *testing.T) {
	cs := &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{
		{Name: "a", Environment: "prod", Error: "no context", Unreachable: true},
		{Name: "b", Environment: "prod", Counts: pipeline.Counts{Unchanged: 3}},
		{Name: "a", Environment: "staging", Counts: pipeline.Counts{Unchanged: 2, Modified: 1, Ghost: 1}},
		{Name: "b", Environment: "staging", Counts: pipeline.Counts{Unchanged: 4}},
		{Name: "a", Environment: "qa", Counts: pipeline.Counts{Unchanged: 1}},
		{Name: "b", Environment: "qa", Error: "render failed"},
		{Name: "a", Environment: "dev", Counts: pipeline.Counts{Unchanged: 5}},
	}}
	got := cs.Drift()
	assert.DeepEqual(t, got, []pipeline.EnvironmentDrift{
		{Environment: "prod", Status: pipeline.Unreachable, Releases: 2, Counts: pipeline.Counts{Unchanged: 3}},
		{Environment: "staging", Status: pipeline.Drifted, Releases: 2, Counts: pipeline.Counts{Unchanged: 6, Modified: 1, Ghost: 1}},
		{Environment: "qa", Status: pipeline.DriftError, Releases: 2, Counts: pipeline.Counts{Unchanged: 1}},
		{Environment: "dev", Status: pipeline.InSync, Releases: 1, Counts: pipeline.Counts{Unchanged: 5}},
	})
	table := report.DriftMarkdown(got)
	assert.Assert(t, is.Contains(table, "| prod | 🔌 unreachable | 2 | | | | |\n"))
	assert.Assert(t, is.Contains(table, "| staging | ⚠️ drifted | 2 | 0 | 1 | 0 | 1 |\n"))
	assert.Assert(t, is.Contains(table, "| dev | ✅ in sync | 1 | 0 | 0 | 0 | 0 |\n"))
	md := report.Markdown(cs, report.MarkdownOptions{Title: "opm drift", Intro: table})
	assert.Assert(t, strings.HasPrefix(md, "## opm drift: prod, staging, qa, dev\n\n"+table+"\n"), md)
	assert.Assert(t, is.Contains(md, "| a | prod |  | | | | 🔌 unreachable |"))
	assert.Assert(t, is.Contains(md, "🔌 **a** (prod) is unreachable, so it could not be compared: no context"))
}
