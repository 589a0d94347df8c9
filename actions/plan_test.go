package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
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

// workflowStep is a step of a job of a workflow file.
type workflowStep struct {
	Uses string            `json:"uses"`
	With map[string]string `json:"with"`
}

// workflowJob is a job of a workflow file, as far as these tests read it.
type workflowJob struct {
	If          string            `json:"if"`
	Needs       any               `json:"needs"`
	Environment string            `json:"environment"`
	Uses        string            `json:"uses"`
	With        map[string]string `json:"with"`
	Secrets     any               `json:"secrets"`
	Strategy    struct {
		FailFast *bool `json:"fail-fast"`
		Matrix   any   `json:"matrix"`
	} `json:"strategy"`
	Steps []workflowStep `json:"steps"`
}

// readWorkflow reads a workflow file: its triggers and its jobs.
func readWorkflow(t *testing.T, path string) (on map[string]any, jobs map[string]workflowJob) {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	var wf struct {
		Jobs map[string]workflowJob `json:"jobs"`
	}
	assert.NilError(t, yaml.Unmarshal(b, &wf))
	var raw map[string]any
	assert.NilError(t, yaml.Unmarshal(b, &raw))
	// YAML 1.1 reads the key "on" as true.
	trig, _ := raw["on"].(map[string]any)
	if trig == nil {
		trig, _ = raw["true"].(map[string]any)
	}
	return trig, wf.Jobs
}

// jobInputs are the Action's inputs as the workflow's step gives them:
// each with: value, its ${{ … }} expressions replaced from vars (an
// expression vars does not name fails the test).
func jobInputs(t *testing.T, with map[string]string, vars map[string]string) map[string]string {
	t.Helper()
	expr := regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)
	out := map[string]string{}
	for k, v := range with {
		out["INPUT_"+strings.ToUpper(k)] = expr.ReplaceAllStringFunc(v, func(m string) string {
			name := expr.FindStringSubmatch(m)[1]
			val, ok := vars[name]
			if !ok {
				t.Fatalf("with: %s: %s is not given by the test", k, m)
			}
			return val
		})
	}
	return out
}

// actionStep is the with: of the job's step that runs this Action.
func actionStep(t *testing.T, job workflowJob) map[string]string {
	t.Helper()
	for _, s := range job.Steps {
		if s.Uses == "./" {
			return s.With
		}
	}
	t.Fatalf("no step runs the Action (uses: ./)")
	return nil
}

// The documented rollout (.github/workflows/rollout.yml calling
// deploy-environment.yml) runs a fleet of any number of waves on every
// push: a plan job, then per environment, all started at once, a gate job
// that waits until the environments it follows run the commit healthy,
// and only then the environment's approval-protected apply job, which
// waits for health. This runs those jobs over four waves on the real API
// server, each with the inputs its workflow step gives (secrets from the
// repository's secrets), the environments' values SOPS-encrypted: every
// deploy starts together, all succeed, later waves' gate jobs say they
// wait, and no apply job (no approval) starts before the environments it
// follows were applied.
func TestRolloutWorkflowOverFourWaves(t *testing.T) {
	on, jobs := readWorkflow(t, "../.github/workflows/rollout.yml")
	assert.Check(t, on["push"] != nil, "rollout runs on push")
	assert.Equal(t, len(jobs), 2, "a plan job and one deploy per environment, whatever the number of waves")
	deploy := jobs["deploy"]
	assert.Equal(t, deploy.Strategy.Matrix, "${{ fromJSON(needs.plan.outputs.matrix) }}")
	assert.Assert(t, deploy.Strategy.FailFast != nil && !*deploy.Strategy.FailFast, "a failure must not cancel a sibling region mid-apply")
	assert.Equal(t, deploy.Uses, "./.github/workflows/deploy-environment.yml")
	assert.Equal(t, deploy.With["environment"], "${{ matrix.environment }}")

	on, jobs = readWorkflow(t, "../.github/workflows/deploy-environment.yml")
	assert.Check(t, on["workflow_call"] != nil)
	gateJob, applyJob := jobs["gates"], jobs["apply"]
	assert.Equal(t, gateJob.Environment, "", "the gate job needs no approval: it only waits")
	gateWith := actionStep(t, gateJob)
	assert.Equal(t, gateWith["mode"], "gates")
	assert.Equal(t, gateWith["environments"], "${{ inputs.environment }}")
	assert.Assert(t, gateWith["gate-timeout"] != "" && gateWith["gate-timeout"] != "0", "the gate job waits for its gates")
	assert.Equal(t, applyJob.Needs, "gates", "the apply job, and so its approval, comes after the gate job")
	assert.Equal(t, applyJob.Environment, "${{ inputs.environment }}", "the apply job is protected by the environment of its name")
	applyWith := actionStep(t, applyJob)
	assert.Equal(t, applyWith["mode"], "apply")
	assert.Equal(t, applyWith["environments"], "${{ inputs.environment }}")
	assert.Check(t, applyWith["wait"] != "false", "the apply job waits for health")

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
// Every environment's secret comes from SOPS: the gate jobs render too.
environments: [_]: valuesFiles: ["secrets.sops.yaml"]
releases: app: #module: appmodule
`, ns))}
	sopsFile, err := os.ReadFile(deploytest.SopsValues(t, "secret: from-sops\n"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(r.dir+"/secrets.sops.yaml", sopsFile, 0o644))
	// The key reaches a job only as the workflow hands it over.
	t.Setenv("SOPS_AGE_KEY", "")
	assert.NilError(t, os.Unsetenv("SOPS_AGE_KEY"))
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

	// Every deploy at once: its gate job, then, once that passed, its
	// apply job (where a reviewer would be asked to approve). The
	// reviewers approve once every later wave's gate job has said it
	// waits (or ended): a gate job that starts after its gates were
	// applied has nothing to wait for, and on a busy machine the first
	// wave could otherwise finish before a later gate job looked.
	n := len(m.Include)
	gateLogs, logs := make([]string, n), make([]string, n)
	errs := make([]error, n)
	applyJobs := make([]*harness, n)
	approvalAsked := make([]time.Time, n)
	said := make([]*seen, n)
	var waiting []*seen
	for i, e := range m.Include {
		said[i] = newSeen("waiting for its promotion gates")
		if e.Wave > 0 {
			waiting = append(waiting, said[i])
		}
	}
	var wg sync.WaitGroup
	for i, e := range m.Include {
		vars := map[string]string{"inputs.path": ".", "inputs.environment": e.Environment,
			"secrets.KUBECONFIG": string(kc), "secrets.SOPS_AGE_KEY": deploytest.SopsAgeKey()}
		gate := newHarness(t, r, "push", "push.json")
		gate.tee = said[i]
		maps.Copy(gate.env, jobInputs(t, gateWith, vars))
		gate.env["INPUT_GATE-TIMEOUT"] = "4m" // the test's scale, not a day's
		job := newHarness(t, r, "push", "push.json")
		applyJobs[i] = job
		maps.Copy(job.env, jobInputs(t, applyWith, vars))
		job.env["INPUT_GATE-TIMEOUT"] = "1m"
		delete(job.env, "INPUT_WAIT") // the workflow's default: wait for health
		job.env["INPUT_TIMEOUT"] = "2m"
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = gate.runErr()
			said[i].end()
			gateLogs[i] = gate.stdout.String()
			if errs[i] != nil {
				return
			}
			for _, w := range waiting {
				<-w.ch
			}
			approvalAsked[i] = time.Now()
			errs[i] = job.runErr()
			logs[i] = job.stdout.String()
		}()
	}
	wg.Wait()
	applied := map[string]time.Time{}
	for i, e := range m.Include {
		assert.NilError(t, errs[i], "%s: gate job:\n%s\napply job:\n%s", e.Environment, gateLogs[i], logs[i])
		if e.Wave > 0 {
			assert.Assert(t, strings.Contains(gateLogs[i], "waiting for its promotion gates"), "%s (wave %d) did not wait:\n%s", e.Environment, e.Wave, gateLogs[i])
			assert.Check(t, strings.Contains(gateLogs[i], "run it healthy"), gateLogs[i])
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
	asked := map[string]time.Time{}
	for i, e := range m.Include {
		asked[e.Environment] = approvalAsked[i]
	}
	for env, gates := range map[string][]string{"qa": {"dev"}, "canary": {"qa"}, "eu": {"canary"}, "us": {"canary"}} {
		for _, g := range gates {
			assert.Assert(t, !applied[env].Before(applied[g]), "%s applied at %s, before its gate %s (%s)", env, applied[env], g, applied[g])
			// Inventory times are whole seconds: the approval came after
			// the second the gating environment was applied in.
			assert.Assert(t, !asked[env].Before(applied[g]), "%s's apply job (its approval) started at %s, before its gate %s was applied (%s)", env, asked[env], g, applied[g])
		}
	}
	// Every wave's job summary carries the fleet board: its group, its
	// gates and itself, the commit each runs.
	for i, e := range m.Include {
		sum := applyJobs[i].summary()
		assert.Assert(t, strings.Contains(sum, "### Fleet board"), "%s:\n%s", e.Environment, sum)
		assert.Check(t, strings.Contains(sum, "| "+e.Environment+" | app | "+r.base[:12]+" | change-"), "%s:\n%s", e.Environment, sum)
	}
	board := applyJobs[len(applyJobs)-1].summary()
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
	all.env["INPUT_SOPS-AGE-KEY"] = deploytest.SopsAgeKey()
	assert.NilError(t, all.run(), all.stdout.String())
	back := newHarness(t, r, "push", "push.json")
	back.env["INPUT_PATH"], back.env["INPUT_MODE"], back.env["INPUT_KUBECONFIG"] = ".", "rollback", string(kc)
	back.env["INPUT_ENVIRONMENTS"], back.env["INPUT_ROLLBACK-TO"] = "production", r.base
	back.env["INPUT_SOPS-AGE-KEY"] = deploytest.SopsAgeKey()
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

// seen closes ch once what is written to it contains want, or once end
// is called: a goroutine waits on a line of a running job's log.
type seen struct {
	want string
	ch   chan struct{}
	once sync.Once
	mu   sync.Mutex
	buf  strings.Builder
}

func newSeen(want string) *seen { return &seen{want: want, ch: make(chan struct{})} }

func (s *seen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if strings.Contains(s.buf.String(), s.want) {
		s.end()
	}
	return len(p), nil
}

func (s *seen) end() { s.once.Do(func() { close(s.ch) }) }
