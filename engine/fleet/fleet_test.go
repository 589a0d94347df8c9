package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/internal/deploytest"
)

const header = deploytest.Header + "releases: app: #module: appmodule\n"

func read(t *testing.T, envs string) (*fleet.Fleet, error) {
	t.Helper()
	d, err := load.Load(context.Background(), deploytest.Write(t, map[string]string{"deploy.cue": header + envs}))
	assert.NilError(t, err)
	return fleet.Read(d)
}

const prodFleet = `
environments: staging: {namespace: "app", group: "staging"}
environments: "prod-canary": {namespace: "app", group: "production", rollout: {wave: 1, after: ["staging"]}}
environments: "prod-eu": {namespace: "app", group: "production", rollout: {wave: 2, after: ["prod-canary"]}}
environments: "prod-us": {namespace: "app", group: "production", rollout: {wave: 2, after: ["prod-canary"]}}
environments: dev: {namespace: "app"}
`

func names(envs []fleet.Environment) (out []string) {
	for _, e := range envs {
		out = append(out, e.Name)
	}
	return out
}

func TestSelectGroupsAndListsInWaveOrder(t *testing.T) {
	f, err := read(t, prodFleet)
	assert.NilError(t, err)
	for spec, want := range map[string][]string{
		"production":         {"prod-canary", "prod-eu", "prod-us"},
		"prod-us,staging":    {"staging", "prod-us"},
		"staging":            {"staging"},
		"dev, production":    {"dev", "prod-canary", "prod-eu", "prod-us"},
		"prod-eu,production": {"prod-canary", "prod-eu", "prod-us"},
	} {
		got, err := f.Select(spec, false)
		assert.NilError(t, err, spec)
		assert.DeepEqual(t, names(got), want)
	}
	got, err := f.Select("production", true)
	assert.NilError(t, err)
	assert.DeepEqual(t, names(got), []string{"prod-canary", "prod-eu", "prod-us"})
	waves := fleet.Waves(got)
	assert.Equal(t, len(waves), 2)
	assert.DeepEqual(t, names(waves[1]), []string{"prod-eu", "prod-us"})
	e, _ := f.Lookup("prod-canary")
	assert.DeepEqual(t, e.Gates, []string{"staging"})
}

func TestSelectionErrorsSuggest(t *testing.T) {
	f, err := read(t, prodFleet)
	assert.NilError(t, err)
	_, err = f.Select("prodution", false)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, `did you mean "production"?`)
	_, err = f.Select("dev", true)
	assert.ErrorContains(t, err, `no environment declares group "dev"`)
}

func TestRolloutGraphErrors(t *testing.T) {
	_, err := read(t, `
environments: a: {namespace: "x", rollout: after: ["b"]}
environments: b: {namespace: "x", rollout: after: ["c"]}
environments: c: {namespace: "x", rollout: after: ["a"]}
`)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, "rollout.after has a cycle: a waits for b waits for c waits for a")
	assert.ErrorContains(t, err, "deploy.cue:")

	_, err = read(t, `
environments: a: {namespace: "x", group: "staging"}
environments: b: {namespace: "x", rollout: after: ["stagin"]}
`)
	assert.ErrorContains(t, err, `environment "b" (at `)
	assert.ErrorContains(t, err, `rollout.after names "stagin": environment or group "stagin" is not declared; did you mean "staging"? environments and groups:`)

	_, err = read(t, `environments: a: {namespace: "x", group: "g", rollout: after: ["g"]}`)
	assert.ErrorContains(t, err, "includes the environment itself")

	_, err = read(t, `environments: a: {namespace: "x", rollout: wave: -1}`)
	assert.Assert(t, err != nil)
}

// The waves are the levels of the gate graph: canary gated on qa lands in
// the wave after qa without a wave of its own, and a chain of four gates
// makes four waves.
func TestWavesFollowTheGates(t *testing.T) {
	f, err := read(t, `
environments: dev: {namespace: "app", group: "pre"}
environments: qa: {namespace: "app", group: "pre", rollout: after: ["dev"]}
environments: canary: {namespace: "app", group: "production", rollout: after: ["qa"]}
environments: eu: {namespace: "app", group: "production", rollout: after: ["canary"]}
environments: us: {namespace: "app", group: "production", rollout: after: ["canary"]}
environments: sandbox: {namespace: "app"}
environments: late: {namespace: "app", rollout: wave: 5}
`)
	assert.NilError(t, err)
	var got []string
	for _, e := range f.Environments {
		got = append(got, fmt.Sprintf("%s:%d", e.Name, e.Wave))
	}
	assert.DeepEqual(t, got, []string{"dev:0", "sandbox:0", "qa:1", "canary:2", "eu:3", "us:3", "late:5"})
	all, err := f.Select("dev,qa,canary,eu,us", false)
	assert.NilError(t, err)
	assert.Equal(t, len(fleet.Waves(all)), 4)
}

// An explicit wave that puts an environment beside or before its gate is
// refused, naming both environments and where the wave is set.
func TestAWaveThatContradictsAGateIsAnError(t *testing.T) {
	_, err := read(t, `
environments: qa: {namespace: "app"}
environments: canary: {namespace: "app", rollout: {wave: 0, after: ["qa"]}}
`)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, `environment "canary" sets rollout.wave 0 (at `)
	assert.ErrorContains(t, err, `but its gate "qa" runs in wave 0`)
	assert.ErrorContains(t, err, "deploy.cue:")
	assert.ErrorContains(t, err, "make it at least 1")
}

// rollout.soak is a Go duration; a gate's environment knows the soak of
// each environment it waits for, and a value that is no duration is
// refused naming the field, the value and where it is set.
func TestSoak(t *testing.T) {
	f, err := read(t, `
environments: qa: {namespace: "x", rollout: soak: "1h30m"}
environments: prod: {namespace: "x", rollout: after: ["qa"]}
`)
	assert.NilError(t, err)
	prod, ok := f.Lookup("prod")
	assert.Assert(t, ok)
	assert.Equal(t, prod.GateSoaks["qa"], 90*time.Minute)
	qa, _ := f.Lookup("qa")
	assert.Equal(t, qa.Soak, 90*time.Minute)

	for _, bad := range []string{`"10 minutes"`, `"ten"`, `600`} {
		d, err := load.Load(context.Background(), deploytest.Write(t, map[string]string{"deploy.cue": header +
			"environments: qa: {namespace: \"x\", rollout: soak: " + bad + "}\n"}))
		if err == nil {
			_, err = fleet.Read(d)
		}
		assert.Assert(t, err != nil, "soak %s was accepted", bad)
		assert.ErrorContains(t, err, "rollout.soak")
		assert.ErrorContains(t, err, strings.Trim(bad, `"`))
		assert.ErrorContains(t, err, "deploy.cue:11:")
	}
}
