package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
)

// RolloutOptions are the options of Rollout: Apply's, for a fleet.
type RolloutOptions struct {
	ApplyOptions
	// ParallelEnvironments bounds how many environments of one wave apply
	// at once; 4 when < 1.
	ParallelEnvironments int `json:"parallelEnvironments,omitempty"`
	// Wave, when not nil, applies that wave only (one job of a CI matrix).
	Wave *int `json:"wave,omitempty"`
	// Timeout bounds the wait for each wave to become healthy; 5m when 0.
	Timeout time.Duration `json:"timeout,omitempty"`
	// NoWait applies every wave without waiting for health (not for fleets
	// with gates: those wait anyway).
	NoWait bool `json:"noWait,omitempty"`
	// Smoke runs the smoke test (see Smoke) of each environment once its
	// wave is healthy, on the environment's own cluster in throwaway
	// namespaces, before the next wave starts; a failure stops the rollout.
	Smoke bool `json:"smoke,omitempty"`
}

// Rollout results per environment.
const (
	RolloutApplied     = "applied"
	RolloutPlanned     = "planned" // dry run
	RolloutFailed      = "failed"
	RolloutUnhealthy   = "unhealthy"
	RolloutSmokeFailed = "smoke failed"
	RolloutGated       = "gated"
	RolloutNotStarted  = "not started"
)

// RolloutEnvironment is what happened to one environment.
type RolloutEnvironment struct {
	FleetEnvironment
	Result string `json:"result"`
	// ChangeIDs are the releases' change IDs ("release" → change ID).
	ChangeIDs map[string]string `json:"changeIds,omitempty"`
	Error     string            `json:"error,omitempty"`
	Releases  []AppliedRelease  `json:"releases,omitempty"`
	// Smoke is the environment's smoke test, when RolloutOptions.Smoke.
	Smoke *SmokeResult `json:"smoke,omitempty"`
}

// RolloutResult is what Rollout returns, in wave order.
type RolloutResult struct {
	Environments []RolloutEnvironment `json:"environments"`
}

// Rollout applies a fleet wave by wave: the environments of a wave in
// parallel (bounded by ParallelEnvironments), each checked against its
// promotion gates first; then it waits until every release of the wave
// is healthy before the next wave starts. The first environment that
// fails, is refused by a gate or stays unhealthy stops every later wave:
// nothing more is applied. A second run continues where it stopped:
// waves already at the change re-apply as no-ops.
func Rollout(ctx context.Context, opts RolloutOptions) (*RolloutResult, error) {
	envs, err := Fleet(ctx, opts.Selection)
	if err != nil {
		return nil, err
	}
	if opts.Wave != nil {
		envs = slices.DeleteFunc(envs, func(e FleetEnvironment) bool { return e.Wave != *opts.Wave })
		if len(envs) == 0 {
			return nil, fault.Validationf("wave %d has no environment in this selection", *opts.Wave)
		}
	}
	res := &RolloutResult{}
	for _, e := range envs {
		res.Environments = append(res.Environments, RolloutEnvironment{FleetEnvironment: e, Result: RolloutNotStarted})
	}
	par := opts.ParallelEnvironments
	if par < 1 {
		par = 4
	}
	// Environments of a wave apply at once; front doors were promised
	// callbacks that never run concurrently.
	var mu sync.Mutex
	if p := opts.Progress; p != nil {
		opts.Progress = func(e ProgressEvent) { mu.Lock(); defer mu.Unlock(); p(e) }
	}
	if d := opts.ReleaseDone; d != nil {
		opts.ReleaseDone = func(r AppliedRelease) { mu.Lock(); defer mu.Unlock(); d(r) }
	}
	start := 0
	for _, wave := range Waves(envs) {
		idx := make([]int, len(wave))
		for i := range wave {
			idx[i] = start + i
		}
		start += len(wave)
		var wg sync.WaitGroup
		sem := make(chan struct{}, par)
		for _, i := range idx {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				res.Environments[i] = rolloutEnvironment(ctx, opts, res.Environments[i])
			}()
		}
		wg.Wait()
		var failed []string
		for _, i := range idx {
			if r := res.Environments[i].Result; r != RolloutApplied && r != RolloutPlanned {
				failed = append(failed, fmt.Sprintf("%s (%s): %s", res.Environments[i].Name, r, res.Environments[i].Error))
			}
		}
		if len(failed) > 0 {
			kind := fault.General
			for _, i := range idx {
				if res.Environments[i].Result == RolloutGated {
					kind = fault.Gate
				}
			}
			return res, fault.Wrap(kind, fmt.Errorf("wave %d stopped the rollout; later waves were not started:\n%s", wave[0].Wave, strings.Join(failed, "\n")))
		}
	}
	return res, nil
}

// rolloutEnvironment gates, applies and waits for one environment.
func rolloutEnvironment(ctx context.Context, opts RolloutOptions, re RolloutEnvironment) RolloutEnvironment {
	sel := opts.Selection.ForEnvironment(re.Name)
	ao := opts.ApplyOptions
	ao.Selection = sel
	ao.fleetEnv = &re.FleetEnvironment
	ar, err := Apply(ctx, ao)
	if fault.KindOf(err) == fault.Gate {
		re.Result, re.Error = RolloutGated, err.Error()
		return re
	}
	if ar != nil {
		re.Releases = ar.Releases
		re.ChangeIDs = map[string]string{}
		for _, r := range ar.Releases {
			re.ChangeIDs[r.Name] = r.ChangeID
		}
	}
	if err != nil {
		re.Result, re.Error = RolloutFailed, err.Error()
		return re
	}
	if opts.DryRun {
		re.Result = RolloutPlanned
		return re
	}
	if opts.NoWait {
		re.Result = RolloutApplied
		return re
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	st, err := Status(ctx, StatusOptions{Target: Target{Selection: sel}, ClusterOptions: opts.ClusterOptions, Wait: true, Timeout: timeout})
	switch {
	case st != nil && st.Healthy:
		re.Result = RolloutApplied
		if opts.Smoke {
			re = smokeEnvironment(ctx, opts, sel, timeout, re)
		}
	case err != nil && st == nil:
		re.Result, re.Error = RolloutFailed, err.Error()
	default:
		re.Result = RolloutUnhealthy
		re.Error = fmt.Sprintf("not healthy within %s", timeout)
		if err != nil {
			re.Error += ": " + err.Error()
		}
	}
	return re
}

// smokeEnvironment runs the smoke test of a healthy environment on its
// own cluster: the wave's verification before the next wave.
func smokeEnvironment(ctx context.Context, opts RolloutOptions, sel Selection, timeout time.Duration, re RolloutEnvironment) RolloutEnvironment {
	sr, err := Smoke(ctx, SmokeOptions{Selection: sel, ClusterOptions: opts.ClusterOptions, Timeout: timeout, ownCluster: true})
	re.Smoke = sr
	switch {
	case err != nil:
		re.Result, re.Error = RolloutSmokeFailed, err.Error()
	case !sr.Passed:
		var failed []string
		for _, r := range sr.Releases {
			if !r.Passed {
				failed = append(failed, r.Name+" at "+r.FailedStep)
			}
		}
		re.Result, re.Error = RolloutSmokeFailed, "smoke test failed: "+strings.Join(failed, ", ")
	}
	return re
}

// gitState is the commit a fleet rollout renders, read once.
type gitState struct {
	commit string
	dirty  bool
	err    error
}

func readGitState(ctx context.Context, dir string) *gitState {
	st, err := gitref.StateOf(ctx, dir)
	return &gitState{commit: st.Commit, dirty: st.Dirty, err: err}
}

// checkGates refuses to apply env unless every release it renders runs,
// in every gating environment, a change recorded from the same commit,
// and is healthy now. Only the commit is compared, so a shallow clone
// (depth 1) is enough; a directory outside git, or with uncommitted
// changes, never passes a gate.
func checkGates(ctx context.Context, opts ApplyOptions, env FleetEnvironment, src *gitState) error {
	sel := opts.Selection
	switch {
	case src.err != nil:
		return fault.Wrap(fault.Gate, fmt.Errorf("environment %s is gated by %s, and gates compare git commits: the deployment directory must be a git checkout (any depth; actions/checkout's default depth 1 is enough): %w", env.Name, strings.Join(env.Gates, ", "), src.err))
	case src.dirty:
		return fault.Gatef("environment %s is gated by %s: the deployment directory has uncommitted changes, which no gating environment can have run; commit them and apply the commit there first", env.Name, strings.Join(env.Gates, ", "))
	}
	releases, err := renderedReleaseKeys(ctx, sel)
	if err != nil {
		return err
	}
	var refusals []string
	for _, g := range env.Gates {
		gsel := opts.Selection.ForEnvironment(g)
		for _, key := range releases {
			gsel.Releases = []string{key}
			st, err := Status(ctx, StatusOptions{Target: Target{Selection: gsel}, ClusterOptions: opts.ClusterOptions})
			if err != nil && (st == nil || len(st.Releases) == 0) {
				if fault.KindOf(err) == fault.Validation {
					continue // the gating environment does not declare this release
				}
				refusals = append(refusals, fmt.Sprintf("%s in %s: cannot be read: %v", key, g, err))
				continue
			}
			for _, rs := range st.Releases {
				runs := "nothing (never applied)"
				var commit string
				if rs.Source != nil {
					commit = rs.Source.Commit
					runs = fmt.Sprintf("commit %s, change %s", short(commit), rs.ChangeID)
					if rs.Source.Dirty {
						runs += " (from uncommitted changes)"
					}
				} else if rs.ChangeID != "" {
					runs = fmt.Sprintf("change %s from no known commit", rs.ChangeID)
				}
				health := "healthy"
				if !rs.Healthy {
					health = "not healthy"
				}
				if commit != src.commit || rs.Source.Dirty || !rs.Healthy {
					refusals = append(refusals, fmt.Sprintf("%s in %s runs %s, %s", key, g, runs, health))
				}
			}
		}
	}
	if len(refusals) > 0 {
		return fault.Gatef("environment %s may only get commit %s after %s run it healthy:\n  %s\napply %s there first (or --skip-gates, which is recorded)",
			env.Name, short(src.commit), strings.Join(env.Gates, ", "), strings.Join(refusals, "\n  "), short(src.commit))
	}
	return nil
}

// waitGates checks env's gates, and with opts.GateTimeout keeps checking
// until they pass or the time is up. A gate that can never pass (no git
// checkout, uncommitted changes) is refused at once.
func waitGates(ctx context.Context, opts ApplyOptions, env FleetEnvironment, dir string) error {
	deadline := time.Now().Add(opts.GateTimeout)
	delay := 2 * time.Second
	for {
		src := readGitState(ctx, dir)
		err := checkGates(ctx, opts, env, src)
		if err == nil || opts.GateTimeout <= 0 || fault.KindOf(err) != fault.Gate || src.err != nil || src.dirty {
			return err
		}
		if time.Now().Add(delay).After(deadline) {
			return fault.Wrap(fault.Gate, fmt.Errorf("waited %s (gate timeout) for the gates of environment %s: %w", opts.GateTimeout, env.Name, err))
		}
		if opts.GateWaiting != nil {
			opts.GateWaiting(err)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		delay = min(2*delay, 15*time.Second)
	}
}

// renderedReleaseKeys are the release keys a selection renders.
func renderedReleaseKeys(ctx context.Context, sel Selection) ([]string, error) {
	r, err := Render(ctx, RenderOptions{Selection: sel})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, rel := range r.Releases {
		keys = append(keys, rel.release.Key)
	}
	return keys, nil
}

// gatesOf is the environment a selection applies to, with its gates
// (none without an environment); fleet is true when the selection names
// several environments (a group, a comma list). An environment nobody
// declares is left for the render to report.
func gatesOf(ctx context.Context, sel Selection, known *FleetEnvironment) (env FleetEnvironment, fleet bool) {
	if sel.Environment == "" && sel.Group == "" {
		return FleetEnvironment{}, false
	}
	if known != nil && known.Name == sel.Environment {
		return *known, false
	}
	envs, err := Fleet(ctx, sel)
	switch {
	case err != nil:
		return FleetEnvironment{}, sel.IsFleet()
	case len(envs) == 1 && envs[0].Name == sel.Environment:
		return envs[0], false
	}
	return FleetEnvironment{}, true
}
