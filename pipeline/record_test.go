package pipeline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// twoServiceFleet is fleetDir with a second release, "worker", of a module
// of its own (other object names), so a commit can change one release and
// leave the other as it was.
func twoServiceFleet(t *testing.T) string {
	t.Helper()
	nss := []string{env.Namespace(t), env.Namespace(t), env.Namespace(t)}
	worker := strings.NewReplacer(`"web`, `"worker`, "deploy/app@v0", "deploy/worker@v0", `name:       "app"`, `name:       "worker"`).
		Replace(strings.Replace(deploytest.HealthyModule, "package app", "package worker", 1))
	dir := deploytest.Write(t, map[string]string{"app/app.cue": deploytest.HealthyModule, "worker/worker.cue": worker, "deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
	workermodule "test.example/deploy/worker"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: qa: {namespace: %[1]q, group: "pre", cluster: kubeConfig: %[4]q}
environments: canary: {namespace: %[2]q, group: "prod", cluster: kubeConfig: %[4]q, rollout: after: ["qa"]}
environments: eu: {namespace: %[3]q, group: "prod", cluster: kubeConfig: %[4]q, rollout: after: ["canary"]}
releases: app: {#module: appmodule, values: stamp: "a"}
releases: worker: {#module: workermodule, values: stamp: "w"}
`, nss[0], nss[1], nss[2], env.Kubeconfig())})
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "a")
	return dir
}

// commit records the tree as a commit and returns it.
func commit(t *testing.T, dir, msg string) string {
	t.Helper()
	gitRun(t, dir, "commit", "-qam", msg)
	return gitRun(t, dir, "rev-parse", "HEAD")
}

// The red button in an incident: the group goes back to commit B although
// most releases did not change at B or since (their change was first
// applied earlier, and B only re-applied it). The record of the commits a
// change ran at finds B for the worker, which is "already there"; a commit
// the record does not hold (the worker was not applied at it) is found by
// rendering it and matching the change ID in history.
func TestFleetRollbackPastUnchangedReleases(t *testing.T) {
	dir := twoServiceFleet(t)
	rollout(t, dir)
	setValues(t, dir, `stamp: "a"`, `stamp: "b"`)
	b := commit(t, dir, "b: app only")
	rollout(t, dir)
	setValues(t, dir, `stamp: "b"`, `stamp: "c"`)
	commit(t, dir, "c: app only")
	rollout(t, dir)

	back := pipeline.RollbackOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Group: "prod"}}, To: b[:10]}
	res, err := pipeline.RollbackFleet(t.Context(), back, time.Minute)
	assert.NilError(t, err, "%s", tableOf(res))
	assert.DeepEqual(t, results(res), map[string]string{"eu": pipeline.RolloutRolledBack, "canary": pipeline.RolloutRolledBack})
	for _, e := range res.Environments {
		assert.DeepEqual(t, releaseNames(e.Releases), []string{"app"}) // the worker was already there
	}
	commits := commitsOf(t, dir, "prod")
	assert.Equal(t, commits["eu/app"], b)

	// d changes the app and is applied to the app alone, e changes it
	// again for everyone: the worker's record never saw d.
	setValues(t, dir, `stamp: "c"`, `stamp: "d"`)
	d := commit(t, dir, "d: app only")
	for _, e := range []string{"qa", "canary", "eu"} {
		_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: e, Releases: []string{"app"}}})
		assert.NilError(t, err)
	}
	setValues(t, dir, `stamp: "d"`, `stamp: "e"`)
	commit(t, dir, "e: app only")
	rollout(t, dir)
	back.To = d
	res, err = pipeline.RollbackFleet(t.Context(), back, time.Minute)
	assert.NilError(t, err, "%s", tableOf(res))
	assert.DeepEqual(t, results(res), map[string]string{"eu": pipeline.RolloutRolledBack, "canary": pipeline.RolloutRolledBack})
	assert.Equal(t, commitsOf(t, dir, "prod")["canary/app"], d)
}

func releaseNames(rs []pipeline.AppliedRelease) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// A re-apply of the running change from a later commit (a commit that did
// not touch the release, or the gate's own "apply the gating environment"
// advice) appends a sighting and keeps when, from where and by whom the
// change was first applied — and with it the health clock a soak reads.
// The actor comes from GitHub's environment in Actions.
func TestReapplyKeepsTheRecordAndTheHealthClock(t *testing.T) {
	t.Setenv("GITHUB_ACTOR", "octocat")
	dir := twoServiceFleet(t)
	a := gitRun(t, dir, "rev-parse", "HEAD")
	qa := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "qa"}, RunURL: "https://ci.example/runs/1"}
	_, err := pipeline.Apply(t.Context(), qa)
	assert.NilError(t, err)
	status := func() pipeline.ReleaseStatus {
		st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "qa", Releases: []string{"app"}}}})
		assert.NilError(t, err)
		return st.Releases[0]
	}
	since := status().Since
	assert.Check(t, since != "")

	// The clock moves on (RFC 3339 has seconds): wait for the next second.
	kubetest.WaitFor(t, 5*time.Second, func() error {
		if time.Now().UTC().Format(time.RFC3339) <= since {
			return fmt.Errorf("still %s", since)
		}
		return nil
	})
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("a commit that touches no release\n"), 0o644))
	gitRun(t, dir, "add", "-A")
	later := commit(t, dir, "notes")
	t.Setenv("GITHUB_ACTOR", "hubot")
	qa.RunURL = "https://ci.example/runs/2"
	res, err := pipeline.Apply(t.Context(), qa)
	assert.NilError(t, err)
	assert.Equal(t, res.Releases[0].Inventory.Previous, res.Releases[0].ChangeID, "the re-apply changed nothing")

	assert.Equal(t, status().Since, since, "a re-apply restarted the health clock")
	h, err := pipeline.History(t.Context(), pipeline.HistoryOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "qa", Releases: []string{"app"}}}})
	assert.NilError(t, err)
	c := h.Releases[0].Changes[0]
	assert.Equal(t, len(h.Releases[0].Changes), 1)
	assert.Equal(t, c.First.Commit, a)
	assert.Equal(t, c.First.Actor, "octocat")
	assert.Equal(t, c.First.RunURL, "https://ci.example/runs/1")
	assert.Equal(t, c.First.Time, since)
	assert.Equal(t, len(c.Seen), 1)
	assert.Equal(t, c.Seen[0].Commit, later)
	assert.Equal(t, c.Seen[0].Actor, "hubot")
	assert.Equal(t, c.Source.Actor, "hubot", "last applied by")
	table := report.HistoryTable(h)
	assert.Check(t, is.Contains(table, a[:12]+" by octocat"), table)
	assert.Check(t, is.Contains(table, "by hubot"), table)
}

// --gate-timeout waits its whole time: the last check is at the deadline,
// and the refusal says how long it waited.
func TestGateTimeoutWaitsItsWholeTime(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	dir := twoServiceFleet(t)
	start := time.Now()
	_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "canary"}, GateTimeout: 3 * time.Second})
	elapsed := time.Since(start)
	assert.ErrorContains(t, err, "(--gate-timeout 3s) for the gates of environment canary")
	assert.ErrorContains(t, err, "app in qa has never been applied")
	assert.Assert(t, elapsed >= 3*time.Second, "returned after %s of a 3s gate timeout", elapsed)
}

// A mistyped group is the same error, with its "did you mean", for every
// command that reads a fleet — not a render of no environment.
func TestMistypedGroupIsNamedEverywhere(t *testing.T) {
	dir := twoServiceFleet(t)
	sel := pipeline.Selection{Dir: dir, Group: "prdo"}
	_, applyErr := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel})
	assert.ErrorContains(t, applyErr, `did you mean "prod"`)
	_, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}})
	assert.Error(t, err, applyErr.Error())
	_, err = pipeline.History(t.Context(), pipeline.HistoryOptions{Target: pipeline.Target{Selection: sel}})
	assert.Error(t, err, applyErr.Error())
	_, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel})
	assert.Error(t, err, applyErr.Error())
}
