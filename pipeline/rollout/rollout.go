// Package rollout drives a fleet wave by wave — the environments of a wave
// at once, each behind its promotion gates, then the wait for health, the
// soak and the smoke test before the next wave — and back again, the last
// wave first; it says what stopped it and which command takes it on. A
// smoke test's five steps in a throwaway namespace are here too. How one
// environment or release is applied, read, diffed or deleted is the
// caller's (Steps, BackSteps, GateReads, SmokeOps): the rollout owns the
// order, the waits and the words, as Kargo's promotion owns its steps'.
package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/workers"
)

// Results per environment.
const (
	Applied     = "applied"
	Planned     = "planned" // dry run
	Failed      = "failed"
	Unhealthy   = "unhealthy"
	SmokeFailed = "smoke failed"
	Gated       = "gated"
	NotStarted  = "not started"
)

// FleetEnvironment is one environment of a fleet selection.
type FleetEnvironment = fleet.Environment

// Release is what a rollout reads of a release it applied: enough to
// offer the command that takes it back.
type Release struct {
	Name     string
	ChangeID string
	// Previous is the change it ran before this one; Written, whether
	// this run wrote its record.
	Previous string
	Written  bool
	// Sensitive keeps its change IDs out of text CI publishes.
	Sensitive bool
}

// AppliedRelease is a release as the caller's apply reports it.
type AppliedRelease interface {
	RolloutRelease() Release
}

// EnvironmentResult is what happened to one environment: R is the
// caller's applied release, S its smoke test.
type EnvironmentResult[R AppliedRelease, S any] struct {
	FleetEnvironment
	Result string `json:"result"`
	// ChangeIDs are the releases' change IDs ("release" → change ID).
	ChangeIDs map[string]string `json:"changeIds,omitempty"`
	Error     string            `json:"error,omitempty"`
	Releases  []R               `json:"releases,omitempty"`
	// Smoke is the environment's smoke test, when Options.Smoke.
	Smoke *S `json:"smoke,omitempty"`
	// Next are the commands that take it on from a failure: fix and
	// rerun, apply a gate first, or roll back.
	Next []string `json:"next,omitempty"`

	// Unhealthy names the releases a failed health wait found unhealthy
	// (nil: not known): only those are offered a rollback.
	Unhealthy []string `json:"-"`
}

// Result is what Run returns, in wave order.
type Result[R AppliedRelease, S any] struct {
	Environments []EnvironmentResult[R, S] `json:"environments"`
}

// Steps are what a rollout does to one environment.
type Steps[R AppliedRelease, S any] interface {
	// Apply applies env without waiting, its promotion gates checked
	// first (a fault.Gate error when they refuse). Releases is nil when
	// nothing was reached, not nil (maybe empty) when the apply ran.
	Apply(ctx context.Context, env fleet.Environment) (releases []R, err error)
	// WaitHealthy waits up to timeout for env's releases (applied, as
	// Apply returned them) to be healthy; when they are not, it says why
	// and which releases are not (nil: not known).
	WaitHealthy(ctx context.Context, env fleet.Environment, applied []R, timeout time.Duration) (healthy bool, why string, unhealthy []string)
	// Unhealthy checks env once, for a soak: "" when every release is
	// healthy, else what is not or why it cannot be read.
	Unhealthy(ctx context.Context, env fleet.Environment) string
	// Smoke runs env's smoke test on its own cluster; the error says what
	// failed.
	Smoke(ctx context.Context, env fleet.Environment, timeout time.Duration) (*S, error)
}

// Options are how Run goes.
type Options struct {
	// Parallel bounds how many environments of one wave apply at once;
	// 4 when < 1.
	Parallel int
	// Timeout bounds the wait for each environment to become healthy;
	// 5m when 0.
	Timeout time.Duration
	// DryRun plans: nothing is waited for. NoWait applies every wave
	// without waiting for health. Smoke runs each healthy environment's
	// smoke test before the next wave.
	DryRun, NoWait, Smoke bool
	// Narrate, when set, hears what the rollout waits for.
	Narrate func(string)
	// Dir is the deployment directory as the user named it, for the
	// commands in Next.
	Dir string
	// SoakInterval, when > 0, is how often a soak re-checks health;
	// SoakProbe, when set, is called after each check that passed.
	SoakInterval time.Duration
	SoakProbe    func()
}

func (o Options) narrate(format string, args ...any) {
	if o.Narrate != nil {
		o.Narrate(fmt.Sprintf(format, args...))
	}
}

// Run rolls envs (a fleet selection, sorted by wave) out wave by wave:
// the environments of a wave in parallel, each applied (its gates checked
// first) and waited for; a wave with a soak stays healthy that long. The
// first environment that fails, is refused by a gate or stays unhealthy
// stops every later wave: nothing more is applied, and the error says
// where. A second run continues where it stopped: waves already at the
// change re-apply as no-ops.
func Run[R AppliedRelease, S any](ctx context.Context, envs []fleet.Environment, steps Steps[R, S], opts Options) (*Result[R, S], error) {
	res := &Result[R, S]{}
	for _, e := range envs {
		res.Environments = append(res.Environments, EnvironmentResult[R, S]{FleetEnvironment: e, Result: NotStarted})
	}
	par := opts.Parallel
	if par < 1 {
		par = 4
	}
	start := 0
	waves := fleet.Waves(envs)
	for w, wave := range waves {
		idx := make([]int, len(wave))
		for i := range wave {
			idx[i] = start + i
		}
		start += len(wave)
		var g workers.Group
		sem := make(chan struct{}, par)
		for _, i := range idx {
			g.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				res.Environments[i] = environment(ctx, steps, opts, res.Environments[i])
			})
		}
		g.Wait()
		if soak := waveSoak(wave); soak > 0 && !opts.DryRun && !opts.NoWait && waveOK(res, idx) {
			soakWave(ctx, steps, opts, res, idx, soak, w == len(waves)-1)
		}
		var failed []string
		for _, i := range idx {
			if r := res.Environments[i].Result; r != Applied && r != Planned {
				// Each environment's error and next step are in the
				// result (the front doors print them once, under the
				// table); the error only says where the rollout stopped.
				res.Environments[i].Next = NextSteps(opts.Dir, res.Environments[i], false)
				failed = append(failed, fmt.Sprintf("%s (%s)", res.Environments[i].Name, r))
			}
		}
		if len(failed) > 0 {
			kind := fault.General
			for _, i := range idx {
				if res.Environments[i].Result == Gated {
					kind = fault.Gate
				}
			}
			return res, fault.Wrap(kind, fmt.Errorf("wave %d stopped the rollout at %s; later waves were not started", wave[0].Wave, strings.Join(failed, ", ")))
		}
	}
	return res, nil
}

// environment gates, applies and waits for one environment.
func environment[R AppliedRelease, S any](ctx context.Context, steps Steps[R, S], opts Options, re EnvironmentResult[R, S]) EnvironmentResult[R, S] {
	releases, err := steps.Apply(ctx, re.FleetEnvironment)
	if fault.KindOf(err) == fault.Gate {
		re.Result, re.Error = Gated, err.Error()
		return re
	}
	if releases != nil {
		re.Releases = releases
		re.ChangeIDs = map[string]string{}
		for _, r := range releases {
			rr := r.RolloutRelease()
			re.ChangeIDs[rr.Name] = rr.ChangeID
		}
	}
	switch {
	case err != nil:
		re.Result, re.Error = Failed, err.Error()
		return re
	case opts.DryRun:
		re.Result = Planned
		return re
	case opts.NoWait:
		re.Result = Applied
		return re
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	opts.narrate("environment %s: waiting up to %s for its releases to become healthy", re.Name, timeout)
	start := time.Now()
	healthy, why, unhealthy := steps.WaitHealthy(ctx, re.FleetEnvironment, re.Releases, timeout)
	re.Unhealthy = unhealthy
	if !healthy {
		re.Result, re.Error = Unhealthy, why
		return re
	}
	opts.narrate("environment %s: healthy after %s", re.Name, time.Since(start).Round(time.Second))
	re.Result = Applied
	if opts.Smoke {
		// The wave's verification before the next wave.
		sr, err := steps.Smoke(ctx, re.FleetEnvironment, timeout)
		re.Smoke = sr
		if err != nil {
			re.Result, re.Error = SmokeFailed, err.Error()
		}
	}
	return re
}
