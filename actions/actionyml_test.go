package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
			If   string            `json:"if"`
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

	steps := map[string]int{}
	for i, s := range a.Runs.Steps {
		switch {
		case s.ID != "":
			steps[s.ID] = i
		case strings.Contains(s.Run, "release.sh\" download"):
			steps["download"] = i
		case strings.HasPrefix(s.Uses, "actions/setup-go@"):
			steps["setup-go"] = i
		case strings.HasPrefix(s.Uses, "actions/cache@"):
			steps["go-cache"] = i
		case strings.Contains(s.Run, "go build"):
			steps["build"] = i
		}
	}
	order := []string{"release", "download", "keys", "bin", "setup-go", "goenv", "go-cache", "build", "opm"}
	for i, name := range order {
		idx, ok := steps[name]
		assert.Assert(t, ok, "step %s is missing", name)
		if i > 0 {
			assert.Assert(t, idx > steps[order[i-1]], "step %s comes after %s", name, order[i-1])
		}
	}
	step := steps["opm"]
	at := func(name string) int { return steps[name] }
	assert.Equal(t, a.Runs.Steps[at("bin")].With["key"], "${{ steps.keys.outputs.bin }}")
	assert.Equal(t, a.Runs.Steps[at("go-cache")].With["key"], "${{ steps.keys.outputs.deps }}")
	assert.Equal(t, a.Runs.Steps[at("setup-go")].With["go-version-file"], "${{ github.action_path }}/go.mod")
	assert.Assert(t, strings.Contains(a.Runs.Steps[at("build")].Run, "./actions"))
	// A release downloads the binary; only other refs build it.
	assert.Equal(t, a.Runs.Steps[at("release")].If, "")
	assert.Equal(t, a.Runs.Steps[at("download")].If, "steps.release.outputs.version != ''")
	assert.Equal(t, a.Runs.Steps[at("download")].Env["DEST"], "${{ runner.temp }}/opm-action", "where the opm step runs it from")
	for _, name := range []string{"keys", "bin"} {
		assert.Equal(t, a.Runs.Steps[at(name)].If, "steps.release.outputs.version == ''", "%s runs only without a release", name)
	}
	for _, name := range []string{"setup-go", "goenv", "go-cache", "build"} {
		assert.Equal(t, a.Runs.Steps[at(name)].If, "steps.release.outputs.version == '' && steps.bin.outputs.cache-hit != 'true'", "%s runs only without a release or a cached binary", name)
	}
	assert.Assert(t, strings.Contains(a.Runs.Steps[step].Run, "$RUNNER_TEMP/opm-action/opm-action"))
	checkCacheKeys(t, a.Runs.Steps[at("keys")].Run)

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
	// Drift and plan modes' own outputs are checked by TestDriftMode and
	// TestPlanMatrixAgreesWithTheCLIPlan, a sharded review's by
	// TestShardedReviewCommentsAsOne.
	written := []string{"drifted", "drift-count", "issue-url", "matrix", "waves", "wave-matrices", "partial", "review-shards", "review-matrix", "review-plan", "review-plan-file"}
	var declared []string
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

// checkCacheKeys runs the key step's script on this repository: the Go
// caches are keyed on go.mod and go.sum, the binary on its sources.
func checkCacheKeys(t *testing.T, script string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+out, "RUNNER_OS=Linux", "RUNNER_ARCH=X64")
	b, err := cmd.CombinedOutput()
	assert.NilError(t, err, string(b))
	b, err = os.ReadFile(out)
	assert.NilError(t, err)
	keys := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		keys[k] = v
	}
	var mod []byte
	for _, f := range []string{"../go.mod", "../go.sum"} {
		c, err := os.ReadFile(f)
		assert.NilError(t, err)
		mod = append(mod, c...)
	}
	sum := sha256.Sum256(mod)
	assert.Equal(t, keys["deps"], "opm-action-go-Linux-X64-"+hex.EncodeToString(sum[:])[:20])
	assert.Assert(t, regexp.MustCompile(`^opm-action-bin-Linux-X64-[0-9a-f]{20}$`).MatchString(keys["bin"]), keys["bin"])
}
