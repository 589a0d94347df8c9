package mdcheck

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestSlugFollowsGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"Install and releases": "install-and-releases",
		"`spec.workload` — resource `#Workload` → Deployment, StatefulSet": "specworkload--resource-workload--deployment-statefulset",
		"Versions: what `@v1` means":          "versions-what-v1-means",
		"Why a [composite](https://x) action": "why-a-composite-action",
		"snake_case and kebab-case":           "snake_case-and-kebab-case",
	} {
		assert.Equal(t, Slug(heading), want, heading)
	}
}

func TestParseFindsAnchorsLinksAndCommands(t *testing.T) {
	d := ParseText("x.md", "# Title\n\n## Same\n## Same\n"+
		"See [the CLI](cli.md#opm-apply) and [here](#same-1), not `[code](nope.md)`.\n"+
		"Run `opm apply examples --env staging | kubectl get -f -` then `./cmd/opm render -e x`.\n"+
		"```sh\nopm status --name n -n ns | --release-id X   # comment --bogus\nkubectl apply --server-side\n```\n"+
		"<a id=\"explicit\"></a>\n")
	assert.Assert(t, d.Anchors["title"] && d.Anchors["same"] && d.Anchors["same-1"] && d.Anchors["explicit"])
	assert.Assert(t, !d.Anchors["same-2"])
	assert.DeepEqual(t, d.Links, []Link{{Line: 5, Target: "cli.md#opm-apply"}, {Line: 5, Target: "#same-1"}})
	assert.DeepEqual(t, d.Commands, []Command{
		{Line: 6, Words: []string{"apply", "examples", "--env", "staging"}},
		{Line: 6, Words: []string{"render", "-e", "x"}},
		{Line: 8, Words: []string{"status", "--name", "n", "-n", "ns", "|", "--release-id", "X"}},
	})
}

func TestCheckLinksReportsMissingFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "other.md"), []byte("# Here\n"), 0o644))
	d := ParseText(filepath.Join(dir, "a.md"), "# A\n[ok](other.md#here) [ok2](#a) [ext](https://e.x/#nope)\n"+
		"[gone](missing.md) [bad](other.md#there) [bad2](#b)\n")
	problems := CheckLinks(d, Parse)
	assert.Equal(t, len(problems), 3, "%v", problems)
	assert.Check(t, is.Contains(problems[0], "missing.md"))
	assert.Check(t, is.Contains(problems[1], "#there"))
	assert.Check(t, is.Contains(problems[2], "#b"))
}
