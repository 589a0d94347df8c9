package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/internal/deploytest"
)

func TestHistoryAndRollbackCommands(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `name: "web"`)
	gitRepo(t, dir, "web")
	first := gitIn(t, dir, "rev-parse", "HEAD")

	code, out, errOut := runOpm(t, "history", "app", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 5, "never applied: not found\n%s%s", out, errOut)
	assert.Check(t, is.Contains(errOut, "has no inventory"))

	t.Setenv("GITHUB_SERVER_URL", "https://github.example")
	t.Setenv("GITHUB_REPOSITORY", "acme/deploy")
	t.Setenv("GITHUB_RUN_ID", "7")
	code, _, errOut = runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig, "-o", "json")
	assert.Equal(t, code, 0, errOut)
	editFile(t, filepath.Join(dir, "deploy.cue"), `name: "web"`, `name: "site"`)
	gitIn(t, dir, "commit", "-qam", "site")
	code, _, errOut = runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)

	code, out, errOut = runOpm(t, "history", "app", dir, "--kubeconfig", env.Kubeconfig, "-o", "json")
	assert.Equal(t, code, 0, errOut)
	var h struct {
		Releases []struct {
			Changes []struct {
				ChangeID string `json:"changeId"`
				Current  bool   `json:"current"`
				Objects  int    `json:"objects"`
				Source   struct{ Commit, Ref, RunURL string }
			} `json:"changes"`
		} `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &h))
	changes := h.Releases[0].Changes
	assert.Equal(t, len(changes), 2)
	assert.Equal(t, changes[1].Source.Commit, first)
	assert.Equal(t, changes[1].Source.Ref, "main")
	assert.Equal(t, changes[1].Source.RunURL, "https://github.example/acme/deploy/actions/runs/7")
	target := changes[1].ChangeID

	// By namespace and name, without the directory: the same table.
	code, out, errOut = runOpm(t, "history", "app", "-n", ns, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "CHANGE"))
	assert.Check(t, is.Contains(out, changes[0].ChangeID+" *"))
	assert.Check(t, is.Contains(out, "main@"+first[:12]))

	code, _, errOut = runOpm(t, "rollback", "app", dir, "--to", "change-sha1-deadbeef", "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 5, errOut)
	assert.Check(t, is.Contains(errOut, "it records: "+changes[0].ChangeID+", "+target))

	// Its Deployment's image never pulls: the rollback's health wait is
	// TestRollbackWaitsForHealth's.
	code, out, errOut = runOpm(t, "rollback", "app", dir, "--to", target, "--kubeconfig", env.Kubeconfig, "--no-wait")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "service/web created"))
	assert.Check(t, is.Contains(out, "service/site deleted"))
	assert.Check(t, is.Contains(out, "release app rolled back from "+changes[0].ChangeID+" to "+target+" (commit "+first+")"))
	assert.Assert(t, serviceExists(t, ns, "web") && !serviceExists(t, ns, "site"))

	code, _, errOut = runOpm(t, "rollback", "app", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 2)
	assert.Check(t, is.Contains(errOut, "--to is required"))
}
