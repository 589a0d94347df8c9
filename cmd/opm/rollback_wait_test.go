package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// A single release's rollback during an incident waits for health as
// apply does: returning to a change that never becomes healthy goes red
// within --timeout, naming the environment, instead of exiting 0 at once;
// --no-wait exits once applied.
func TestRollbackWaitsForHealth(t *testing.T) {
	ns := env.Namespace(t)
	dir := appInTest(t, ns, "broken: true")
	gitRepo(t, dir, "A: a Deployment that never becomes ready")
	kc := "--kubeconfig=" + env.Kubeconfig
	code, out, errOut := runOpm(t, "apply", "--no-wait", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)

	deploy := filepath.Join(dir, "deploy.cue")
	b, err := os.ReadFile(deploy)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(deploy, []byte(strings.Replace(string(b), "broken: true", "broken: false", 1)), 0o644))
	gitIn(t, dir, "commit", "-qam", "B: healthy")
	code, out, errOut = runOpm(t, "apply", dir, "--env", "test", kc, "--timeout", "2m")
	assert.Equal(t, code, 0, "%s%s", out, errOut)

	changes := changesOf(t, "app", dir, "--env", "test", kc)
	assert.Equal(t, len(changes), 2)
	changeA := changes[1].ChangeID

	code, out, errOut = runOpm(t, "rollback", "app", dir, "--env", "test", "--to", changeA, kc, "--timeout", "10s")
	assert.Assert(t, code != 0, "a rollback to a change that never becomes healthy went green: %s%s", out, errOut)
	assert.Check(t, is.Contains(errOut, "environment test"), errOut)
	t.Log(errOut)

	code, out, errOut = runOpm(t, "rollback", "app", dir, "--env", "test", "--to", changeA, kc, "--no-wait")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
}
