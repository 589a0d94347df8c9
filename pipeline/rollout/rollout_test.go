package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/pipeline/rollout"
)

// release is an applied release as a caller reports it.
type release struct {
	name, change, previous string
	sensitive              bool
}

func (r release) RolloutRelease() rollout.Release {
	return rollout.Release{Name: r.name, ChangeID: r.change, Previous: r.previous, Written: true, Sensitive: r.sensitive}
}

type smoke struct{ passed bool }

// steps script what each environment does; every call is recorded in order
// (per environment: apply, wait, unhealthy checks, smoke).
type steps struct {
	mu        sync.Mutex
	calls     []string
	applyErr  map[string]error
	unhealthy map[string]string // after a healthy wait
	smokeErr  map[string]error
	// broken says what a soak check finds, per environment and check.
	broken func(env string, check int) string
	checks map[string]int
}

func (s *steps) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

func (s *steps) Apply(_ context.Context, env rollout.FleetEnvironment) ([]release, error) {
	s.record("apply " + env.Name)
	if err := s.applyErr[env.Name]; err != nil {
		if fault.KindOf(err) == fault.Gate {
			return nil, err
		}
		return []release{}, err
	}
	return []release{{name: "api", change: "change-" + env.Name, previous: "change-old"}}, nil
}

func (s *steps) WaitHealthy(_ context.Context, env rollout.FleetEnvironment, applied []release, _ time.Duration) (bool, string, []string) {
	s.record(fmt.Sprintf("wait %s (%d)", env.Name, len(applied)))
	if why := s.unhealthy[env.Name]; why != "" {
		return false, why, []string{"api"}
	}
	return true, "", nil
}

func (s *steps) Unhealthy(_ context.Context, env rollout.FleetEnvironment) string {
	s.mu.Lock()
	s.checks[env.Name]++
	n := s.checks[env.Name]
	s.mu.Unlock()
	if s.broken == nil {
		return ""
	}
	return s.broken(env.Name, n)
}

func (s *steps) Smoke(_ context.Context, env rollout.FleetEnvironment, _ time.Duration) (*smoke, error) {
	s.record("smoke " + env.Name)
	if err := s.smokeErr[env.Name]; err != nil {
		return &smoke{}, err
	}
	return &smoke{passed: true}, nil
}

func newSteps() *steps {
	return &steps{applyErr: map[string]error{}, unhealthy: map[string]string{}, smokeErr: map[string]error{}, checks: map[string]int{}}
}

func fleetOf(waves ...[]string) []rollout.FleetEnvironment {
	var out []rollout.FleetEnvironment
	for w, names := range waves {
		for _, n := range names {
			out = append(out, rollout.FleetEnvironment{Name: n, Wave: w})
		}
	}
	return out
}

func resultsOf[R rollout.AppliedRelease, S any](res *rollout.Result[R, S]) map[string]string {
	out := map[string]string{}
	for _, e := range res.Environments {
		out[e.Name] = e.Result
	}
	return out
}

// A wave starts only once the wave before it is healthy; the first
// environment that fails stops every later wave, and its next step says
// what to do.
func TestAFailedEnvironmentStopsLaterWaves(t *testing.T) {
	s := newSteps()
	s.applyErr["qa"] = errors.New("render: boom")
	res, err := rollout.Run(context.Background(), fleetOf([]string{"dev"}, []string{"qa", "staging"}, []string{"prod"}), s, rollout.Options{Dir: "my deploy"})
	assert.ErrorContains(t, err, "wave 1 stopped the rollout at qa (failed); later waves were not started")
	assert.Equal(t, fault.KindOf(err), fault.General)
	assert.DeepEqual(t, resultsOf(res), map[string]string{"dev": rollout.Applied, "qa": rollout.Failed, "staging": rollout.Applied, "prod": rollout.NotStarted})
	assert.Equal(t, s.calls[0], "apply dev")
	assert.Equal(t, s.calls[1], "wait dev (1)", "dev is waited for before the next wave: %v", s.calls)
	for _, c := range s.calls {
		assert.Assert(t, c != "apply prod", "a wave after a failure is never applied: %v", s.calls)
	}
	qa := res.Environments[1]
	assert.Equal(t, qa.Error, "render: boom")
	assert.DeepEqual(t, qa.Next, []string{"fix what the error names, commit, and rerun: opm apply 'my deploy' --env qa"})
	assert.DeepEqual(t, res.Environments[0].ChangeIDs, map[string]string{"api": "change-dev"})
}

// A gate's refusal is the rollout's kind of error too, so a CI job can
// tell "wait for the gate" from "broken", and names no step of its own.
func TestAGateRefusalStopsTheRolloutAsAGate(t *testing.T) {
	s := newSteps()
	s.applyErr["prod"] = fault.Gatef("environment prod may only get commit abc once staging has run it healthy")
	res, err := rollout.Run(context.Background(), fleetOf([]string{"staging"}, []string{"prod"}), s, rollout.Options{})
	assert.Equal(t, fault.KindOf(err), fault.Gate)
	prod := res.Environments[1]
	assert.Equal(t, prod.Result, rollout.Gated)
	assert.Assert(t, prod.Next == nil && prod.Releases == nil && prod.ChangeIDs == nil, "%+v", prod)
}

// An environment that does not become healthy is offered the rollback of
// what this run changed; a dry run and --no-wait never wait.
func TestUnhealthyOffersTheRollbackAndNoWaitNeverWaits(t *testing.T) {
	s := newSteps()
	s.unhealthy["canary"] = "deployment.apps/api: ImagePullBackOff"
	res, err := rollout.Run(context.Background(), fleetOf([]string{"canary"}, []string{"prod"}), s, rollout.Options{Dir: "deploy"})
	assert.ErrorContains(t, err, "at canary (unhealthy)")
	c := res.Environments[0]
	assert.Equal(t, c.Error, "deployment.apps/api: ImagePullBackOff")
	assert.DeepEqual(t, c.Next, []string{
		"opm rollback api deploy --env canary --to change-old   # back to what ran before",
		"or fix forward: commit a fix and rerun: opm apply deploy --env canary",
	})
	for _, o := range []rollout.Options{{NoWait: true}, {DryRun: true}} {
		s := newSteps()
		s.unhealthy["canary"] = "never read"
		res, err := rollout.Run(context.Background(), fleetOf([]string{"canary"}, []string{"prod"}), s, o)
		assert.NilError(t, err)
		assert.DeepEqual(t, s.calls, []string{"apply canary", "apply prod"})
		want := rollout.Applied
		if o.DryRun {
			want = rollout.Planned
		}
		assert.DeepEqual(t, resultsOf(res), map[string]string{"canary": want, "prod": want})
	}
}

// With Smoke, a healthy environment's smoke test runs before the next
// wave, and a failed one stops the rollout.
func TestASmokeFailureStopsTheRollout(t *testing.T) {
	s := newSteps()
	s.smokeErr["staging"] = errors.New("smoke test failed: api at http")
	res, err := rollout.Run(context.Background(), fleetOf([]string{"dev"}, []string{"staging"}, []string{"prod"}), s, rollout.Options{Smoke: true})
	assert.ErrorContains(t, err, "at staging (smoke failed)")
	assert.DeepEqual(t, s.calls, []string{"apply dev", "wait dev (1)", "smoke dev", "apply staging", "wait staging (1)", "smoke staging"})
	assert.Equal(t, res.Environments[1].Error, "smoke test failed: api at http")
	assert.Assert(t, res.Environments[1].Smoke != nil)
}

// A wave with a soak is checked until the soak is over; an environment
// that breaks during it is unhealthy, with what broke and when, and the
// next wave does not start.
func TestASoakCatchesWhatBreaksAfterTheWaveWasHealthy(t *testing.T) {
	s := newSteps()
	s.broken = func(env string, check int) string {
		if env == "canary" && check >= 3 {
			return "Deployment/api InProgress: 1 of 2 replicas"
		}
		return ""
	}
	envs := fleetOf([]string{"canary"}, []string{"prod"})
	envs[0].Soak = time.Hour
	probes := 0
	res, err := rollout.Run(context.Background(), envs, s, rollout.Options{SoakInterval: time.Millisecond, SoakProbe: func() { probes++ }})
	assert.ErrorContains(t, err, "at canary (unhealthy)")
	assert.Equal(t, probes, 2, "two checks passed before the third found it broken")
	assert.ErrorContains(t, errors.New(res.Environments[0].Error), "into its 1h0m0s soak: Deployment/api InProgress: 1 of 2 replicas")
	assert.Equal(t, res.Environments[1].Result, rollout.NotStarted)
}

// A soak cut short (the job cancelled) is never a pass.
func TestAnInterruptedSoakIsNotAPass(t *testing.T) {
	s := newSteps()
	envs := fleetOf([]string{"canary"}, []string{"prod"})
	envs[0].Soak = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := rollout.Run(ctx, envs, s, rollout.Options{SoakInterval: time.Millisecond, SoakProbe: cancel})
	assert.ErrorContains(t, err, "at canary (unhealthy)")
	assert.Equal(t, res.Environments[0].Error, "soak interrupted: context canceled")
	assert.Equal(t, res.Environments[1].Result, rollout.NotStarted)
}
