package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"
)

type actionYML struct {
	Inputs  map[string]struct{ Default string } `json:"inputs"`
	Outputs map[string]struct{ Value string }   `json:"outputs"`
	Runs    struct {
		Using string `json:"using"`
		Steps []struct {
			ID   string            `json:"id"`
			Uses string            `json:"uses"`
			With map[string]string `json:"with"`
			Env  map[string]string `json:"env"`
			Run  string            `json:"run"`
		} `json:"steps"`
	} `json:"runs"`
}

// action.yml and the Go code must agree: a composite action passes only
// the inputs its step lists, so a forgotten one would be silently empty.
func TestActionYMLPassesEveryInput(t *testing.T) {
	b, err := os.ReadFile("../action.yml")
	assert.NilError(t, err)
	var a actionYML
	assert.NilError(t, yaml.Unmarshal(b, &a))
	assert.Equal(t, a.Runs.Using, "composite")

	var step, setupGo, build int = -1, -1, -1
	for i, s := range a.Runs.Steps {
		switch {
		case s.ID == "opm":
			step = i
		case strings.HasPrefix(s.Uses, "actions/setup-go@"):
			setupGo = i
		case strings.Contains(s.Run, "go build"):
			build = i
		}
	}
	assert.Assert(t, setupGo >= 0 && build > setupGo && step > build, "setup-go, then build, then run")
	sg := a.Runs.Steps[setupGo].With
	assert.Equal(t, sg["go-version-file"], "${{ github.action_path }}/go.mod")
	assert.Equal(t, sg["cache-dependency-path"], "${{ github.action_path }}/go.sum")
	assert.Assert(t, strings.Contains(a.Runs.Steps[build].Run, "./actions"))

	env := a.Runs.Steps[step].Env
	for name := range a.Inputs {
		key := "INPUT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		assert.Equal(t, env[key], "${{ inputs."+name+" }}", "input %s is passed as %s", name, key)
	}
	assert.Equal(t, len(env), len(a.Inputs), "no env entry without an input")
	for _, want := range []string{"path", "environments", "releases", "mode", "base-ref", "kubeconfig", "context", "comment",
		"github-token", "fail-on-prune", "no-prune", "max-history", "force"} {
		_, ok := a.Inputs[want]
		assert.Assert(t, ok, "input %s is declared", want)
	}
	assert.Equal(t, a.Inputs["github-token"].Default, "${{ github.token }}")
	assert.Equal(t, a.Inputs["comment"].Default, "true")
	assert.Equal(t, a.Inputs["fail-on-prune"].Default, "false")

	// The outputs are exactly what a run writes.
	r := newRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	assert.NilError(t, h.run())
	var written, declared []string
	for k := range h.outputs() {
		written = append(written, k)
	}
	for k, o := range a.Outputs {
		declared = append(declared, k)
		assert.Equal(t, o.Value, "${{ steps.opm.outputs."+k+" }}")
	}
	slices.Sort(written)
	slices.Sort(declared)
	assert.DeepEqual(t, written, declared)
}

// Inputs arrive as action.yml passes them: underscores for dashes.
func TestInputsWithUnderscores(t *testing.T) {
	r := newRepo(t)
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename")
	h := newHarness(t, r, "workflow_dispatch", "push.json")
	h.env["INPUT_BASE_REF"] = "main"
	h.env["INPUT_FAIL_ON_PRUNE"] = "true"
	h.env["INPUT_ENVIRONMENTS"] = " staging , staging,"
	err := h.run()
	assert.ErrorContains(t, err, "3 objects would be pruned")
}
