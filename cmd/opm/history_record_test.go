package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The record of a change survives a rollback to it: who first applied it
// and when stay, and the rollback is a sighting (who returned to it and
// when). A change applied with --force-conflicts says whose fields it
// took, in history's table and JSON.
func TestHistoryKeepsTheRecordAcrossARollback(t *testing.T) {
	ns := env.Namespace(t)
	dir := appInTest(t, ns, `stamp: "a"`)
	gitRepo(t, dir, "A")
	kc := "--kubeconfig=" + env.Kubeconfig
	as := func(actor string, args ...string) (int, string, string) {
		return runOpmIn(withEnv(t.Context(), func(k string) string {
			if k == "GITHUB_ACTOR" {
				return actor
			}
			return os.Getenv(k)
		}), args...)
	}
	code, out, errOut := as("alice", "apply", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	history := func() []historyChange { return changesOf(t, "app", dir, "--env", "test", kc) }
	a := history()[0]
	assert.Equal(t, a.First.Actor, "alice")

	deploy := filepath.Join(dir, "deploy.cue")
	b, err := os.ReadFile(deploy)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(deploy, []byte(strings.Replace(string(b), `stamp: "a"`, `stamp: "b"`, 1)), 0o644))
	gitIn(t, dir, "commit", "-qam", "B")
	code, out, errOut = as("bob", "apply", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)

	code, out, errOut = as("frank", "rollback", "app", dir, "--env", "test", "--to", a.ChangeID, kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	back := history()[0]
	assert.Equal(t, back.ChangeID, a.ChangeID)
	assert.DeepEqual(t, back.First, a.First)
	assert.Assert(t, len(back.Seen) == 1, "%+v", back)
	assert.Equal(t, back.Seen[0].Actor, "frank")

	// Another manager edits the ConfigMap; the next apply takes it back
	// only when told to, and the change says from whom.
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "web-config", metav1.GetOptions{})
	assert.NilError(t, err)
	cm.Data["stamp"] = "edited"
	_, err = cs.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "some-operator"})
	assert.NilError(t, err)
	code, out, errOut = runOpm(t, "apply", dir, "--env", "test", kc, "--force-conflicts")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.DeepEqual(t, history()[0].ForcedFrom, []string{"some-operator"})
	code, out, errOut = runOpm(t, "history", "app", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "(forced from some-operator)"), out)
}

// changesOf is `opm history RELEASE DIR ARGS… -o json`: the first
// release's changes, newest first.
func changesOf(t *testing.T, release, dir string, args ...string) []historyChange {
	t.Helper()
	code, out, errOut := runOpm(t, append([]string{"history", release, dir, "-o", "json"}, args...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	var h struct {
		Releases []struct{ Changes []historyChange }
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &h), out)
	assert.Assert(t, len(h.Releases) > 0, out)
	return h.Releases[0].Changes
}

type historyChange struct {
	ChangeID   string `json:"changeId"`
	First      struct{ Time, Commit, Actor string }
	Seen       []struct{ Time, Commit, Actor string }
	ForcedFrom []string `json:"forcedFrom"`
}
