package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

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
