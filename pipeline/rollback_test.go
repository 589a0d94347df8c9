package pipeline_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// gitDeploy is a deployment directory of deploytest's app in ns, committed
// as the first commit of a repository on branch main.
func gitDeploy(t *testing.T, ns, values string) (dir, commit string) {
	t.Helper()
	dir = deploytest.Dir(t, ns, values)
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "first")
	return dir, gitRun(t, dir, "rev-parse", "HEAD")
}

func setValues(t *testing.T, dir, old, new string) {
	t.Helper()
	setFile(t, filepath.Join(dir, "deploy.cue"), old, new)
}

// setFile replaces old, which must be there, with new in file p.
func setFile(t *testing.T, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(b), old))
	assert.NilError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

func historyOf(t *testing.T, dir string) pipeline.ReleaseHistory {
	t.Helper()
	h, err := pipeline.History(t.Context(), pipeline.HistoryOptions{
		Target:         pipeline.Target{Selection: pipeline.Selection{Dir: dir}},
		ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()},
	})
	assert.NilError(t, err)
	assert.Equal(t, len(h.Releases), 1)
	return h.Releases[0]
}

func rollbackOpts(dir, to string) pipeline.RollbackOptions {
	o := pipeline.RollbackOptions{ApplyOptions: applyOpts(dir), To: to}
	o.Releases = []string{"app"}
	return o
}

// Each change records where it came from and who applied it; history
// lists them; rollback renders the recorded commit and applies it as a new
// change.
func TestHistoryAndRollback(t *testing.T) {
	t.Setenv("GITHUB_ACTOR", "release-bot")
	ns := env.Namespace(t)
	dir, c1 := gitDeploy(t, ns, `name: "web"`)
	opts := applyOpts(dir)
	opts.RunURL = "https://github.example/acme/deploy/actions/runs/1"
	first, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	a := first.Releases[0].ChangeID

	setValues(t, dir, `name: "web"`, `name: "site"`)
	gitRun(t, dir, "commit", "-qam", "rename")
	c2 := gitRun(t, dir, "rev-parse", "HEAD")
	second, err := pipeline.Apply(t.Context(), applyOpts(dir))
	assert.NilError(t, err)
	b := second.Releases[0].ChangeID
	assert.Assert(t, a != b)
	assert.Assert(t, !present(t, applySvcs, ns, "web") && present(t, applySvcs, ns, "site"))

	h := historyOf(t, dir)
	assert.Equal(t, len(h.Changes), 2)
	assert.Equal(t, h.Changes[0].ChangeID, b)
	assert.Assert(t, h.Changes[0].Current)
	assert.DeepEqual(t, *h.Changes[0].Source, inventorySource(c2, "main", false, ""))
	assert.Equal(t, h.Changes[1].ChangeID, a)
	assert.DeepEqual(t, *h.Changes[1].Source, inventorySource(c1, "main", false, opts.RunURL))
	assert.Equal(t, h.Changes[1].Objects, 3)
	assert.Equal(t, h.Changes[1].ManifestDigest, first.Releases[0].ManifestDigest)
	table := report.HistoryTable(&pipeline.HistoryResult{Releases: []pipeline.ReleaseHistory{h}})
	assert.Check(t, is.Contains(table, b+" *"))
	assert.Check(t, is.Contains(table, "main@"+c1[:12]+" by release-bot "+opts.RunURL))

	// A dry run changes nothing.
	dry := rollbackOpts(dir, a)
	dry.DryRun = true
	res, err := pipeline.Rollback(t.Context(), dry)
	assert.NilError(t, err)
	assert.Equal(t, res.From, b)
	assert.Assert(t, !present(t, applySvcs, ns, "web"))
	assert.Equal(t, historyOf(t, dir).Changes[0].ChangeID, b)

	res, err = pipeline.Rollback(t.Context(), rollbackOpts(dir, a))
	assert.NilError(t, err)
	assert.Equal(t, res.From, b)
	assert.Equal(t, res.To, a)
	assert.Equal(t, res.Commit, c1)
	assert.Equal(t, res.RenderedDigest, res.RecordedDigest)
	assert.Equal(t, res.Releases[0].ChangeID, a, "the same inputs are the same change")
	assert.Assert(t, present(t, applySvcs, ns, "web") && !present(t, applySvcs, ns, "site"), "site was pruned as by any apply")
	h = historyOf(t, dir)
	assert.DeepEqual(t, []string{h.Changes[0].ChangeID, h.Changes[1].ChangeID}, []string{a, b})
	assert.Equal(t, h.Changes[0].Source.Commit, c1, "the rollback records the commit it rendered")

	// Uncommitted edits are recorded as dirty.
	setValues(t, dir, `name: "site"`, `name: "dirty"`)
	dirty, err := pipeline.Apply(t.Context(), applyOpts(dir))
	assert.NilError(t, err)
	h = historyOf(t, dir)
	assert.Equal(t, h.Changes[0].ChangeID, dirty.Releases[0].ChangeID)
	assert.DeepEqual(t, *h.Changes[0].Source, inventorySource(c2, "main", true, ""))
	gitRun(t, dir, "checkout", "-q", "--", ".")
}

func inventorySource(commit, ref string, dirty bool, run string) inventory.Source {
	return inventory.Source{Commit: commit, Ref: ref, Dirty: dirty, RunURL: run, Actor: "release-bot"}
}

func TestRollbackRefusals(t *testing.T) {
	ns := env.Namespace(t)
	dir, _ := gitDeploy(t, ns, `name: "web"`)

	_, err := pipeline.Rollback(t.Context(), rollbackOpts(dir, "change-sha1-00000000"))
	assert.Equal(t, fault.KindOf(err), fault.NotFound)
	assert.ErrorContains(t, err, "has no inventory", "nothing applied yet")

	// Applied with a values file: the commit alone renders another digest.
	extra := deploytest.Values(t, `replicas: 3`)
	withFile := applyOpts(dir, extra)
	res, err := pipeline.Apply(t.Context(), withFile)
	assert.NilError(t, err)
	a := res.Releases[0].ChangeID
	res, err = pipeline.Apply(t.Context(), applyOpts(dir))
	assert.NilError(t, err)
	b := res.Releases[0].ChangeID

	_, err = pipeline.Rollback(t.Context(), rollbackOpts(dir, "change-sha1-00000000"))
	assert.Equal(t, fault.KindOf(err), fault.NotFound)
	assert.ErrorContains(t, err, "it records: "+b+", "+a)

	_, err = pipeline.Rollback(t.Context(), rollbackOpts(dir, a))
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, "--allow-different-digest")
	assert.Equal(t, historyOf(t, dir).Changes[0].ChangeID, b, "nothing was applied")
	allow := rollbackOpts(dir, a)
	allow.AllowDifferentDigest = true
	rb, err := pipeline.Rollback(t.Context(), allow)
	assert.NilError(t, err)
	assert.Assert(t, rb.RenderedDigest != rb.RecordedDigest)

	// The same deployment in another repository: the commit is not there.
	other := t.TempDir()
	reviewCopyDir(t, dir, other)
	assert.NilError(t, os.RemoveAll(filepath.Join(other, ".git")))
	gitRun(t, other, "init", "-q", "-b", "main")
	gitRun(t, other, "add", "-A")
	gitRun(t, other, "commit", "-q", "-m", "elsewhere")
	_, err = pipeline.Rollback(t.Context(), rollbackOpts(other, b))
	assert.Equal(t, fault.KindOf(err), fault.NotFound)
	assert.ErrorContains(t, err, "which is not in the local repository")

	// Applied from outside git: no commit to return to.
	plain := t.TempDir()
	reviewCopyDir(t, other, plain)
	assert.NilError(t, os.RemoveAll(filepath.Join(plain, ".git")))
	setValues(t, plain, `name: "web"`, `name: "plain"`)
	res, err = pipeline.Apply(t.Context(), applyOpts(plain))
	assert.NilError(t, err)
	_, err = pipeline.Rollback(t.Context(), rollbackOpts(dir, res.Releases[0].ChangeID))
	assert.Equal(t, fault.KindOf(err), fault.NotFound)
	assert.ErrorContains(t, err, "recorded no clean git commit (it was applied from outside a git repository")
}
