package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// A group selected by --env or --group works in render, diff, status and
// apply, prune and delete, in wave order; apply stops at a gate with exit
// code 8 and prints the rollout table; one-environment commands refuse a
// fleet.
func TestFleetSelectionAcrossCommands(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: "stage-b": {namespace: "%[1]s-b", group: "staging", rollout: wave: 1}
environments: "stage-a": {namespace: "%[1]s-a", group: "staging"}
environments: prod: {namespace: "%[1]s-p", group: "production", rollout: {wave: 2, after: ["staging"]}}
releases: app: #module: appmodule
`, ns))
	gitRepo(t, dir, "fleet")
	kc := "--kubeconfig=" + env.Kubeconfig

	code, out, errOut := runOpm(t, "render", dir, "--env", "staging", "-o", "json")
	assert.Equal(t, code, 0, errOut)
	var r struct {
		Releases []struct{ Environment string }
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, len(r.Releases), 2)
	assert.Equal(t, r.Releases[0].Environment, "stage-a", "wave 0 first")
	assert.Equal(t, r.Releases[1].Environment, "stage-b")

	code, out, errOut = runOpm(t, "diff", dir, "--group", "staging", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Index(out, "env stage-a") < strings.Index(out, "env stage-b") && strings.Contains(out, "env stage-a"), out)

	code, out, errOut = runOpm(t, "plan", dir)
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, hasRow(out, "2", "prod", "production", "stage-a,stage-b"), out)

	// A dry run plans every wave and writes nothing.
	code, out, errOut = runOpm(t, "apply", dir, "--group", "staging", "--dry-run", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Equal(t, strings.Count(out, "planned"), 2, out)

	// Production before staging runs the commit: refused by its gate.
	code, _, errOut = runOpm(t, "apply", dir, "--env", "prod", kc)
	assert.Equal(t, code, 8, errOut)
	assert.Assert(t, strings.Contains(errOut, "may only get commit"), errOut)

	// One wave only (a CI matrix job): wave 0 of staging.
	code, out, errOut = runOpm(t, "apply", dir, "--group", "staging", "--wave", "0", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, hasRow(out, "stage-a", "0", "staging", "-", "applied"), out)
	assert.Assert(t, !strings.Contains(out, "stage-b"), out)

	code, out, errOut = runOpm(t, "apply", dir, "--env", "staging,production", kc, "--timeout", "30s")
	assert.Equal(t, code, 0, errOut)
	for _, row := range [][]string{{"stage-a", "0", "staging", "-", "applied"}, {"stage-b", "1", "staging", "-", "applied"}, {"prod", "2", "production", "-", "applied"}} {
		assert.Assert(t, hasRow(out, row...), "%q not in\n%s", row, out)
	}
	// Each wave's health wait is narrated on stderr, naming the environment.
	for _, e := range []string{"stage-a", "stage-b", "prod"} {
		assert.Check(t, strings.Contains(errOut, "environment "+e+": waiting up to 30s for its releases to become healthy"), errOut)
		assert.Check(t, regexp.MustCompile("environment "+e+": healthy after [0-9]+s").MatchString(errOut), errOut)
	}
	code, out, errOut = runOpm(t, "status", dir, "--env", "production", kc, "-o", "json")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Contains(out, `"healthy": true`), out)

	code, out, errOut = runOpm(t, "prune", dir, "--group", "staging", kc, "--dry-run", "-o", "json")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Index(out, `"environment": "stage-a"`) < strings.Index(out, `"environment": "stage-b"`), out)

	code, _, errOut = runOpm(t, "rbac", dir, "--group", "staging", kc)
	assert.Equal(t, code, 2, errOut)
	assert.Assert(t, strings.Contains(errOut, "rbac works on one environment at a time"), errOut)

	code, out, errOut = runOpm(t, "delete", dir, "--env", "staging,production", kc, "-o", "json")
	assert.Equal(t, code, 0, errOut)
	assert.Equal(t, strings.Count(out, `"releaseId"`), 3, out)
}

// hasRow reports whether a line of a table starts with these cells.
func hasRow(table string, cells ...string) bool {
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(cells) && slices.Equal(f[:len(cells)], cells) {
			return true
		}
	}
	return false
}

// Rolling an environment back to a change it ran before is not a
// promotion: its gate does not hold it back although the gating
// environment runs a newer commit, and the change says it was a rollback.
func TestRollbackInAFleetPassesItsGate(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: qa: {namespace: "%[1]s-qa"}
environments: canary: {namespace: "%[1]s-canary", rollout: after: ["qa"]}
releases: app: #module: appmodule
releases: app: values: stamp: "1"
`, ns))
	gitRepo(t, dir, "one replica")
	kc := "--kubeconfig=" + env.Kubeconfig
	apply := func(envName string) {
		t.Helper()
		code, _, errOut := runOpm(t, "apply", dir, "--env", envName, kc, "--timeout", "1m")
		assert.Equal(t, code, 0, errOut)
	}
	apply("qa")
	apply("canary")
	first := changesOf(t, "app", dir, "--env", "canary", kc)[0].ChangeID

	editFile(t, dir+"/deploy.cue", `stamp: "1"`, `stamp: "2"`)
	gitIn(t, dir, "commit", "-qam", "two replicas")
	apply("qa")
	apply("canary")
	// qa moves on again; canary goes back to what it ran first.
	editFile(t, dir+"/deploy.cue", `stamp: "2"`, `stamp: "3"`)
	gitIn(t, dir, "commit", "-qam", "three replicas")
	apply("qa")
	code, _, errOut := runOpm(t, "rollback", "app", dir, "--env", "canary", "--to", first, kc, "-o", "json")
	assert.Equal(t, code, 0, "the gate held back a rollback: %s", errOut)
	assert.Assert(t, !strings.Contains(errOut, "may only get commit"), errOut)
	code, out, errOut := runOpm(t, "history", "app", dir, "--env", "canary", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Contains(out, "which this environment ran before"), "the rollback is recorded:\n%s", out)

	// The fleet board: which commit runs where, healthy since when, and
	// the skipped gate, without a script.
	head := gitIn(t, dir, "rev-parse", "HEAD")
	firstCommit := gitIn(t, dir, "rev-list", "--max-parents=0", "HEAD")
	code, out, errOut = runOpm(t, "status", dir, "--env", "qa,canary", kc, "-o", "markdown")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.Contains(out, "| qa | app | "+head[:12]+" | "), out)
	assert.Assert(t, strings.Contains(out, "| canary | app | "+firstCommit[:12]+" | "), out)
	assert.Assert(t, strings.Contains(out, "| healthy | "), out)
	assert.Assert(t, strings.Contains(out, "rollback to "), "the skipped gate is on the board:\n%s", out)
	code, out, errOut = runOpm(t, "status", dir, "--env", "qa,canary", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, strings.HasPrefix(out, "ENVIRONMENT  RELEASE  COMMIT"), out)
}

// A gated apply that waits (--gate-timeout) says on stderr what it waits
// for and how long is left, and then how long it waited.
func TestGateWaitIsNarrated(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	dir := gatedRepo(t)
	code, out, errOut := runOpm(t, "apply", dir, "--env", "prod", "--gate-timeout", "5s", "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 8, "%s%s", out, errOut)
	assert.Check(t, strings.Contains(errOut, "environment prod: waiting for its promotion gates, "), errOut)
	assert.Check(t, strings.Contains(errOut, "of --gate-timeout 5s left: environment prod may only get commit"), errOut)
	assert.Check(t, strings.Contains(errOut, "(--gate-timeout 5s) for the gates of environment prod"), errOut)
}

// opm gates is a workflow's gate job: it checks (and waits for) an
// environment's gates without applying it, exits 8 while they refuse and
// 0 once the environments it follows run the commit healthy.
func TestGatesCommandChecksWithoutApplying(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	dir := gatedRepo(t)
	kc := "--kubeconfig=" + env.Kubeconfig
	code, out, errOut := runOpm(t, "gates", dir, "--env", "prod", "--gate-timeout", "3s", kc)
	assert.Equal(t, code, 8, "%s%s", out, errOut)
	assert.Check(t, strings.Contains(errOut, "environment prod: waiting for its promotion gates, "), errOut)
	assert.Check(t, strings.Contains(errOut, "app in qa has never been applied"), errOut)

	code, out, errOut = runOpm(t, "gates", dir, "--env", "qa", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, strings.Contains(out, "environment qa has no promotion gates"), out)
	code, out, errOut = runOpm(t, "gates", dir, "--env", "prod,qa", kc)
	assert.Equal(t, code, 2, "a gate job checks one environment: %s%s", out, errOut)

	code, _, errOut = runOpm(t, "apply", dir, "--env", "qa", kc, "--timeout", "1m")
	assert.Equal(t, code, 0, errOut)
	code, out, errOut = runOpm(t, "gates", dir, "--env", "prod", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	head := gitIn(t, dir, "rev-parse", "HEAD")
	assert.Check(t, strings.Contains(out, "environment prod may get commit "+head[:12]+": qa has run it healthy"), out)
	// Nothing was applied to prod.
	code, out, errOut = runOpm(t, "history", "app", dir, "--env", "prod", kc)
	assert.Check(t, code == 5 && strings.Contains(errOut, "it was never applied there (environment prod)"), "gates applied prod: %d\n%s%s", code, out, errOut)
}

// gatedRepo is a one-commit repository of two environments, prod gated
// after qa, each in a namespace of its own.
func gatedRepo(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: qa: {namespace: "%[1]s-qa"}
environments: prod: {namespace: "%[1]s-p", rollout: after: ["qa"]}
releases: app: #module: appmodule
`, ns))
	gitRepo(t, dir, "gated")
	return dir
}
