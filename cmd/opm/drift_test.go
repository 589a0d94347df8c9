package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/catalog"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// diff --all-environments: every environment against its own cluster, in
// wave order; an unreachable one is reported as such, and the others are
// still compared.
func TestDiffAllEnvironments(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import (
	core %q
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: here: namespace: %q
environments: far: {namespace: %q, cluster: kubeContext: "far-away", rollout: after: ["here"]}
releases: app: #module: appmodule
`, catalog.ModulePath, ns, ns)})
	code, _, errOut := runOpm(t, "apply", "--no-wait", dir, "--env", "here", "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)

	code, out, errOut := runOpm(t, "diff", dir, "--all-environments", "--kubeconfig", env.Kubeconfig, "-o", "json", "--exit-code")
	assert.Equal(t, code, 3, "an unreachable environment is a connectivity error (2+ with --exit-code)\n%s", errOut)
	assert.Check(t, is.Contains(errOut, "far-away"))
	var cs struct {
		Releases []struct {
			Environment string
			Unreachable bool
			Error       string
			Counts      struct{ Unchanged, Added int }
		}
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &cs))
	// In wave order (here, then far, which follows it), not by name.
	assert.Equal(t, len(cs.Releases), 2)
	assert.Equal(t, cs.Releases[0].Environment, "here")
	assert.Check(t, !cs.Releases[0].Unreachable && cs.Releases[0].Error == "")
	assert.Equal(t, cs.Releases[0].Counts.Unchanged, 3)
	assert.Equal(t, cs.Releases[1].Environment, "far")
	assert.Check(t, cs.Releases[1].Unreachable)

	code, out, _ = runOpm(t, "diff", dir, "--all-environments", "--kubeconfig", env.Kubeconfig, "-o", "markdown")
	assert.Equal(t, code, 3, "without --exit-code: the connectivity class")
	assert.Check(t, is.Contains(out, "| app | far | "+ns+" | | | | 🔌 unreachable |"))

	code, _, errOut = runOpm(t, "diff", dir, "--all-environments", "--env", "here")
	assert.Equal(t, code, 2)
	assert.Check(t, is.Contains(errOut, "exclude each other"))
}
