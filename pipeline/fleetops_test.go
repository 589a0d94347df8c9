package pipeline_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// fleetDir is a git repository of a three-wave fleet on the test plane:
// qa (group pre), then canary (after qa), then eu (after canary), both
// in group prod, each in a namespace of its own, plus body.
func fleetDir(t *testing.T, qaRollout, body string) (dir string, nss []string) {
	t.Helper()
	nss = []string{env.Namespace(t), env.Namespace(t), env.Namespace(t)}
	dir = deploytest.HealthyDir(t, fmt.Sprintf(`
environments: qa: {namespace: %[1]q, group: "pre", cluster: kubeConfig: %[4]q, rollout: {%[5]s}}
environments: canary: {namespace: %[2]q, group: "prod", cluster: kubeConfig: %[4]q, rollout: after: ["qa"]}
environments: eu: {namespace: %[3]q, group: "prod", cluster: kubeConfig: %[4]q, rollout: after: ["canary"]}
releases: app: {#module: appmodule, values: stamp: "a"}
`, nss[0], nss[1], nss[2], env.Kubeconfig(), qaRollout)+body)
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "a")
	return dir, nss
}

func rollout(t *testing.T, dir string) *pipeline.RolloutResult {
	t.Helper()
	res, err := pipeline.Rollout(t.Context(), pipeline.RolloutOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "qa,prod"}}, Timeout: time.Minute})
	assert.NilError(t, err, "%s", tableOf(res))
	return res
}

func tableOf(res *pipeline.RolloutResult) string {
	if res == nil {
		return ""
	}
	return report.RolloutTable(res)
}

// commitsOf is the commit each environment's release runs, by status.
func commitsOf(t *testing.T, dir, sel string) map[string]string {
	t.Helper()
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: sel}}})
	assert.NilError(t, err)
	out := map[string]string{}
	for _, r := range st.Releases {
		out[r.Environment+"/"+r.Name] = r.Source.Commit
	}
	return out
}

// A fleet goes back to a commit wave by wave, the last wave first, past
// its gates (a rollback is not a promotion), each change recorded as a
// rollback. A commit one release never ran is refused before anything
// is written. History takes the group, also when it is given as --env.
func TestFleetRollbackGoesBackLastWaveFirst(t *testing.T) {
	dir, _ := fleetDir(t, "", "")
	a := gitRun(t, dir, "rev-parse", "HEAD")
	rollout(t, dir)
	setValues(t, dir, `stamp: "a"`, `stamp: "b"`)
	gitRun(t, dir, "commit", "-qam", "b")
	b := gitRun(t, dir, "rev-parse", "HEAD")
	rollout(t, dir)
	assert.DeepEqual(t, commitsOf(t, dir, "qa,prod"), map[string]string{"qa/app": b, "canary/app": b, "eu/app": b})

	// The group prod back to a: eu first, then the canary; qa keeps b,
	// so the canary's gate (qa runs b) would refuse a promotion of a.
	back := pipeline.RollbackOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Group: "prod"}}, To: a[:10]}
	res, err := pipeline.RollbackFleet(t.Context(), back, time.Minute)
	assert.NilError(t, err, "%s", tableOf(res))
	assert.DeepEqual(t, names(envsOf(res)), []string{"eu", "canary"})
	assert.DeepEqual(t, results(res), map[string]string{"eu": pipeline.RolloutRolledBack, "canary": pipeline.RolloutRolledBack})
	assert.DeepEqual(t, commitsOf(t, dir, "qa,prod"), map[string]string{"qa/app": b, "canary/app": a, "eu/app": a})
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "eu"}}})
	assert.NilError(t, err)
	assert.Check(t, is.Contains(st.Releases[0].Source.GatesSkippedBy, "rollback to "))
	// The canary's change was made after eu's: reverse wave order.
	h, err := pipeline.History(t.Context(), pipeline.HistoryOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Group: "prod"}}})
	assert.NilError(t, err)
	assert.Equal(t, len(h.Releases), 2)
	assert.Equal(t, h.Releases[0].Environment, "canary")
	assert.Check(t, h.Releases[0].Changes[0].Timestamp >= h.Releases[1].Changes[0].Timestamp, "canary %s before eu %s", h.Releases[0].Changes[0].Timestamp, h.Releases[1].Changes[0].Timestamp)

	// Again: nothing to do.
	res, err = pipeline.RollbackFleet(t.Context(), back, time.Minute)
	assert.NilError(t, err)
	assert.DeepEqual(t, results(res), map[string]string{"eu": pipeline.RolloutAlreadyThere, "canary": pipeline.RolloutAlreadyThere})

	// c runs in qa only: the canary and eu never ran it, so a rollback of
	// the whole fleet to c is refused, and nothing is written.
	setValues(t, dir, `stamp: "b"`, `stamp: "c"`)
	gitRun(t, dir, "commit", "-qam", "c")
	c := gitRun(t, dir, "rev-parse", "HEAD")
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "qa"}})
	assert.NilError(t, err)
	before := commitsOf(t, dir, "qa,prod")
	assert.DeepEqual(t, before, map[string]string{"qa/app": c, "canary/app": a, "eu/app": a})
	all := pipeline.RollbackOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "qa,prod"}}, To: c}
	_, err = pipeline.RollbackFleet(t.Context(), all, time.Minute)
	assert.Equal(t, fault.KindOf(err), fault.NotFound, "%v", err)
	assert.ErrorContains(t, err, "nothing was rolled back")
	assert.ErrorContains(t, err, "app in canary (it ran: "+a[:12]+", "+b[:12]+")")
	assert.DeepEqual(t, commitsOf(t, dir, "qa,prod"), before)

	// History of the group by --env (it names no environment).
	h, err = pipeline.History(t.Context(), pipeline.HistoryOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "prod"}}})
	assert.NilError(t, err)
	assert.Equal(t, len(h.Releases), 2)
	table := report.HistoryTable(h)
	assert.Check(t, is.Contains(table, "(gates skipped: rollback to "), table)
}

func envsOf(res *pipeline.RolloutResult) (out []pipeline.FleetEnvironment) {
	for _, e := range res.Environments {
		out = append(out, e.FleetEnvironment)
	}
	return out
}

// rollout.soak: qa must stay healthy that long before the canary may
// follow. The gate says how long qa has been healthy of its soak; a
// rollout waits the soak out, re-checking, and a qa that breaks during
// it stops the rollout with what broke and the exact rollback command.
func TestSoakHoldsTheNextWave(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	dir, nss := fleetDir(t, `soak: "1h"`, "")
	qa := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "qa"}}
	_, err := pipeline.Apply(t.Context(), qa)
	assert.NilError(t, err)
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: qa.Selection}, Wait: true, Timeout: time.Minute})
	assert.NilError(t, err)
	assert.Assert(t, st.Healthy)
	assert.Assert(t, st.Releases[0].Since != "")
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "canary"}})
	assert.Equal(t, fault.KindOf(err), fault.Gate, "%v", err)
	assert.ErrorContains(t, err, "app in qa runs commit ")
	assert.ErrorContains(t, err, "of its 1h0m0s soak (")
	// Only time is missing: the next step is to wait, never to apply qa
	// again (which would change nothing).
	assert.ErrorContains(t, err, "left; wait for it here with --gate-timeout 1h")
	assert.Check(t, !strings.Contains(err.Error(), "opm apply"), "%v", err)

	// A short soak that qa survives: the canary follows.
	setValues(t, dir, `soak: "1h"`, `soak: "3s"`)
	gitRun(t, dir, "commit", "-qam", "short soak")
	var checks atomic.Int32
	ro := pipeline.RolloutOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "qa,canary"}}, Timeout: time.Minute}
	pipeline.SetSoakProbe(&ro, 200*time.Millisecond, func() { checks.Add(1) })
	var said strings.Builder
	var sayMu sync.Mutex
	ro.HealthWaiting = func(s string) {
		sayMu.Lock()
		defer sayMu.Unlock()
		said.WriteString(s + "\n")
	}
	res, err := pipeline.Rollout(t.Context(), ro)
	assert.NilError(t, err, "%s", tableOf(res))
	assert.Assert(t, checks.Load() > 0, "the soak re-checked qa")
	// The soak is narrated: what it waits for and how much is left.
	assert.Check(t, is.Contains(said.String(), "environment qa: healthy; soaking for 3s (rollout.soak) before the next wave"), said.String())
	assert.Check(t, is.Contains(said.String(), "of its 3s soak left"), said.String())
	ro.HealthWaiting = nil

	// qa breaks during its soak: the canary does not start.
	setValues(t, dir, `soak: "3s"`, `soak: "10m"`)
	setValues(t, dir, `stamp: "a"`, `stamp: "b"`)
	gitRun(t, dir, "commit", "-qam", "long soak")
	cs, err := kubernetes.NewForConfig(env.Config())
	assert.NilError(t, err)
	var broke atomic.Bool
	pipeline.SetSoakProbe(&ro, 200*time.Millisecond, func() {
		if !broke.Swap(true) {
			assert.Check(t, cs.CoreV1().Services(nss[0]).Delete(t.Context(), "web", metav1.DeleteOptions{}))
		}
	})
	start := time.Now()
	res, err = pipeline.Rollout(t.Context(), ro)
	assert.ErrorContains(t, err, "wave 0 stopped the rollout at qa (unhealthy)")
	assert.Assert(t, time.Since(start) < 5*time.Minute, "the soak stopped when qa broke")
	assert.DeepEqual(t, results(res), map[string]string{"qa": pipeline.RolloutUnhealthy, "canary": pipeline.RolloutNotStarted})
	table := report.RolloutTable(res)
	assert.Check(t, is.Contains(table, "into its 10m0s soak: Service/web Missing"), table)
	assert.Check(t, is.Contains(table, "next: opm rollback app "+dir+" --env qa --to "), table)
	assert.Check(t, !strings.Contains(err.Error(), "soak"), "the error says where it stopped; the table says why, once: %v", err)
}

// The API server's refusal of a value names the field; the error adds
// which value set it and where (the environment, a values file), and
// what to do.
func TestAPIRefusalNamesTheValuesSource(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{"app/app.cue": `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: memory: *"64Mi" | string

#components: web: {
	core.#Workload
	spec: workload: {
		type: "stateless"
		name: "web"
		container: {image: "registry.k8s.io/pause:3.10", resources: limits: memory: #config.memory}
	}
}
`, "deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: staging: {namespace: %q, values: memory: "12x"}
releases: app: #module: appmodule
`, ns)})
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "staging"}, ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}})
	assert.Assert(t, err != nil)
	assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
	assert.ErrorContains(t, err, "Deployment")
	assert.ErrorContains(t, err, `field Deployment.apps/`+ns+`/web spec.template.spec.containers[0].resources.limits[memory] = "12x" is not a quantity such as 128Mi, 0.5 or 500m: set by values.memory, from environment "staging" at `)
	assert.ErrorContains(t, err, "deploy.cue:11:")
	assert.ErrorContains(t, err, "next: correct that value and apply again")
	assert.Equal(t, res.Releases[0].Error, err.Error())
}
