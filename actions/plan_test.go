package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/inventory"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// fleetRepo is a repository with a staging group (two environments in
// waves 0 and 1) and production (wave 2, gated by staging), in ns.
func fleetRepo(t *testing.T, ns string) *repo {
	t.Helper()
	r := &repo{t: t, dir: deploytest.HealthyDir(t, fmt.Sprintf(`
environments: "stage-b": {namespace: "%[1]s-b", group: "staging", rollout: wave: 1}
environments: "stage-a": {namespace: "%[1]s-a", group: "staging"}
environments: prod: {namespace: "%[1]s-p", group: "production", rollout: {wave: 2, after: ["staging"]}}
releases: app: #module: appmodule
`, ns))}
	r.git("init", "-q", "-b", "main")
	r.base = r.commit("fleet")
	return r
}

// Plan mode's matrices are the CLI's plan: the same environments, waves
// and groups, in wave order, per wave too.
func TestPlanMatrixAgreesWithTheCLIPlan(t *testing.T) {
	r := fleetRepo(t, "plan")
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_PATH"] = "."
	h.env["INPUT_MODE"] = "plan"
	assert.NilError(t, h.run())
	out := h.outputs()
	// What `opm plan -o json` prints.
	cli, err := exec.Command("go", "run", "../cmd/opm", "plan", r.dir, "-o", "json").Output()
	assert.NilError(t, err)
	var want pipeline.Plan
	assert.NilError(t, json.Unmarshal(cli, &want))
	var m pipeline.Matrix
	assert.NilError(t, json.Unmarshal([]byte(out["matrix"]), &m))
	assert.DeepEqual(t, m, want.Matrix)
	assert.DeepEqual(t, m.Include, []pipeline.MatrixEntry{
		{Environment: "stage-a", Wave: 0, Group: "staging"}, {Environment: "stage-b", Wave: 1, Group: "staging"}, {Environment: "prod", Wave: 2, Group: "production"},
	})
	assert.Equal(t, out["waves"], "[0,1,2]")
	var per map[string]pipeline.Matrix
	assert.NilError(t, json.Unmarshal([]byte(out["wave-matrices"]), &per))
	assert.DeepEqual(t, per["2"].Include, []pipeline.MatrixEntry{{Environment: "prod", Wave: 2, Group: "production"}})
	assert.Assert(t, strings.Contains(h.summary(), "| 2 | prod | production |"))

	// A group selects its members only.
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	assert.NilError(t, h.run())
	assert.NilError(t, json.Unmarshal([]byte(h.outputs()["matrix"]), &m))
	assert.Equal(t, len(m.Include), 2)
}

// A matrix job that applies production alone still meets its gate.
func TestApplyModeChecksGates(t *testing.T) {
	env := testCluster(t)
	ns := env.Namespace(t)
	kc, err := os.ReadFile(env.Kubeconfig)
	assert.NilError(t, err)
	r := fleetRepo(t, ns)
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_PATH"] = "."
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_KUBECONFIG"] = string(kc)
	h.env["INPUT_ENVIRONMENTS"] = "prod"
	err = h.run()
	assert.ErrorContains(t, err, "may only get commit")
	assert.Assert(t, strings.Contains(h.summary(), "stage-a"), h.summary())

	h.env["INPUT_ENVIRONMENTS"] = "stage-a,stage-b"
	assert.NilError(t, h.run())
	h.env["INPUT_ENVIRONMENTS"] = "prod"
	assert.NilError(t, h.run())
}

// The documented rollout workflow (.github/workflows/rollout.yml) runs
// a fleet of any number of waves with no job per wave: a plan job, then one
// matrix job per environment, all started at once, each applying when its
// gates pass (gate-timeout). This runs that logic over four waves on the
// real API server: every matrix job starts together, all succeed, later
// waves say they wait, and each environment is applied only after the
// environments gating it.
func TestRolloutWorkflowOverFourWaves(t *testing.T) {
	b, err := os.ReadFile("../.github/workflows/rollout.yml")
	assert.NilError(t, err)
	var wf struct {
		Jobs map[string]struct {
			Needs    any `json:"needs"`
			Strategy struct {
				Matrix any `json:"matrix"`
			} `json:"strategy"`
			Steps []struct {
				Uses string            `json:"uses"`
				With map[string]string `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	assert.NilError(t, yaml.Unmarshal(b, &wf))
	assert.Equal(t, len(wf.Jobs), 2, "a plan job and one apply job, whatever the number of waves")
	apply := wf.Jobs["apply"]
	assert.Equal(t, apply.Strategy.Matrix, "${{ fromJSON(needs.plan.outputs.matrix) }}")
	var with map[string]string
	for _, s := range apply.Steps {
		if s.Uses == "./" {
			with = s.With
		}
	}
	assert.Equal(t, with["mode"], "apply")
	assert.Equal(t, with["environments"], "${{ matrix.environment }}")
	assert.Assert(t, with["gate-timeout"] != "" && with["gate-timeout"] != "0", "the apply step waits for its gates")

	env := testCluster(t)
	ns := env.Namespace(t)
	kc, err := os.ReadFile(env.Kubeconfig)
	assert.NilError(t, err)
	r := &repo{t: t, dir: deploytest.HealthyDir(t, fmt.Sprintf(`
environments: dev: {namespace: "%[1]s-dev", group: "pre"}
environments: qa: {namespace: "%[1]s-qa", group: "pre", rollout: after: ["dev"]}
environments: canary: {namespace: "%[1]s-canary", group: "production", rollout: after: ["qa"]}
environments: eu: {namespace: "%[1]s-eu", group: "production", rollout: after: ["canary"]}
environments: us: {namespace: "%[1]s-us", group: "production", rollout: after: ["canary"]}
releases: app: #module: appmodule
`, ns))}
	r.git("init", "-q", "-b", "main")
	r.base = r.commit("a fleet of four waves")
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	for _, e := range []string{"dev", "qa", "canary", "eu", "us"} {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + e}}, metav1.CreateOptions{})
		assert.NilError(t, err)
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns+"-"+e, metav1.DeleteOptions{}) })
	}

	// The plan job.
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_PATH"] = "."
	h.env["INPUT_MODE"] = "plan"
	assert.NilError(t, h.run())
	assert.Equal(t, h.outputs()["waves"], "[0,1,2,3]")
	var m pipeline.Matrix
	assert.NilError(t, json.Unmarshal([]byte(h.outputs()["matrix"]), &m))
	assert.Equal(t, len(m.Include), 5)

	// The apply job: every matrix entry at once.
	logs := make([]string, len(m.Include))
	errs := make([]error, len(m.Include))
	jobs := make([]*harness, len(m.Include))
	var wg sync.WaitGroup
	for i, e := range m.Include {
		job := newHarness(t, r, "push", "push.json")
		jobs[i] = job
		job.env["INPUT_PATH"] = "."
		job.env["INPUT_MODE"] = "apply"
		job.env["INPUT_KUBECONFIG"] = string(kc)
		job.env["INPUT_ENVIRONMENTS"] = e.Environment
		job.env["INPUT_GATE-TIMEOUT"] = "4m"
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = job.runErr()
			logs[i] = job.stdout.String()
		}()
	}
	wg.Wait()
	applied := map[string]time.Time{}
	for i, e := range m.Include {
		assert.NilError(t, errs[i], "%s: %s", e.Environment, logs[i])
		if e.Wave > 0 {
			assert.Assert(t, strings.Contains(logs[i], "waiting for its promotion gates"), "%s (wave %d) did not wait:\n%s", e.Environment, e.Wave, logs[i])
		}
		invs, err := cs.CoreV1().Secrets(ns+"-"+e.Environment).List(t.Context(), metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentInventory})
		assert.NilError(t, err)
		assert.Equal(t, len(invs.Items), 1, e.Environment)
		inv, err := inventory.Decode(&invs.Items[0])
		assert.NilError(t, err)
		_, c, ok := inv.Latest()
		assert.Assert(t, ok)
		applied[e.Environment], err = time.Parse(time.RFC3339, c.Timestamp)
		assert.NilError(t, err)
	}
	for env, gates := range map[string][]string{"qa": {"dev"}, "canary": {"qa"}, "eu": {"canary"}, "us": {"canary"}} {
		for _, g := range gates {
			assert.Assert(t, !applied[env].Before(applied[g]), "%s applied at %s, before its gate %s (%s)", env, applied[env], g, applied[g])
		}
	}
	// Every wave's job summary carries the fleet board: its group, its
	// gates and itself, the commit each runs.
	for i, e := range m.Include {
		sum := jobs[i].summary()
		assert.Assert(t, strings.Contains(sum, "### Fleet board"), "%s:\n%s", e.Environment, sum)
		assert.Check(t, strings.Contains(sum, "| "+e.Environment+" | app | "+r.base[:12]+" | change-"), "%s:\n%s", e.Environment, sum)
	}
	board := jobs[len(jobs)-1].summary()
	for _, e := range []string{"canary", "eu", "us"} {
		assert.Check(t, strings.Contains(board, "| "+e+" | app | "), "the production board lists %s:\n%s", e, board)
	}

	// A second commit everywhere (a group in the environments input),
	// then the production group back to the first, last wave first.
	assert.NilError(t, os.WriteFile(r.dir+"/stamp.cue", []byte("package deploy\n\nreleases: app: values: stamp: \"b\"\n"), 0o644))
	second := r.commit("b")
	all := newHarness(t, r, "push", "push.json")
	all.env["INPUT_PATH"], all.env["INPUT_MODE"], all.env["INPUT_KUBECONFIG"] = ".", "apply", string(kc)
	all.env["INPUT_ENVIRONMENTS"] = "pre,production"
	assert.NilError(t, all.run(), all.stdout.String())
	back := newHarness(t, r, "push", "push.json")
	back.env["INPUT_PATH"], back.env["INPUT_MODE"], back.env["INPUT_KUBECONFIG"] = ".", "rollback", string(kc)
	back.env["INPUT_ENVIRONMENTS"], back.env["INPUT_ROLLBACK-TO"] = "production", r.base
	assert.NilError(t, back.run(), back.stdout.String())
	sum := back.summary()
	assert.Check(t, strings.Contains(sum, "rolled back"), sum)
	assert.Check(t, strings.Contains(sum, "### Fleet board"), sum)
	runs := func(env string) string {
		invs, err := cs.CoreV1().Secrets(ns+"-"+env).List(t.Context(), metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentInventory})
		assert.NilError(t, err)
		inv, err := inventory.Decode(&invs.Items[0])
		assert.NilError(t, err)
		_, c, _ := inv.Latest()
		return c.Source.Commit
	}
	for env, want := range map[string]string{"dev": second, "qa": second, "canary": r.base, "eu": r.base, "us": r.base} {
		assert.Check(t, runs(env) == want, "%s runs %s, want %s", env, runs(env), want)
	}
}
