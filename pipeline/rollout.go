package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/rollout"
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

	soakInterval time.Duration // tests: how often a soak re-checks health
	soakProbe    func()        // tests: called after each soak check that passed

	// Smoke runs the smoke test (see Smoke) of each environment once its
	// wave is healthy, on the environment's own cluster in throwaway
	// namespaces, before the next wave starts; a failure stops the rollout.
	Smoke bool `json:"smoke,omitempty"`
}

// Rollout results per environment.
const (
	RolloutApplied     = rollout.Applied
	RolloutPlanned     = rollout.Planned // dry run
	RolloutFailed      = rollout.Failed
	RolloutUnhealthy   = rollout.Unhealthy
	RolloutSmokeFailed = rollout.SmokeFailed
	RolloutGated       = rollout.Gated
	RolloutNotStarted  = rollout.NotStarted
)

// RolloutEnvironment is what happened to one environment.
type RolloutEnvironment = rollout.EnvironmentResult[AppliedRelease, SmokeResult]

// RolloutResult is what Rollout returns, in wave order.
type RolloutResult = rollout.Result[AppliedRelease, SmokeResult]

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
	// Environments of a wave apply at once; front doors were promised
	// callbacks that never run concurrently.
	var mu sync.Mutex
	if p := opts.Progress; p != nil {
		opts.Progress = func(e ProgressEvent) { mu.Lock(); defer mu.Unlock(); p(e) }
	}
	if d := opts.ReleaseDone; d != nil {
		opts.ReleaseDone = func(r AppliedRelease) { mu.Lock(); defer mu.Unlock(); d(r) }
	}
	return rollout.Run(ctx, envs, rolloutSteps{opts}, rollout.Options{
		Parallel: opts.ParallelEnvironments,
		Timeout:  opts.Timeout,
		DryRun:   opts.DryRun, NoWait: opts.NoWait, Smoke: opts.Smoke,
		Narrate:      opts.HealthWaiting,
		Dir:          opts.shown(),
		SoakInterval: opts.soakInterval, SoakProbe: opts.soakProbe,
	})
}

// rolloutSteps are the per-environment operations a rollout drives.
type rolloutSteps struct{ opts RolloutOptions }

// Apply applies one environment of the fleet; the wave waits, with the
// rollout's timeout.
func (s rolloutSteps) Apply(ctx context.Context, env FleetEnvironment) ([]AppliedRelease, error) {
	ao := s.opts.ApplyOptions
	ao.Selection = s.opts.Selection.ForEnvironment(env.Name)
	ao.Wait = false
	ar, err := applyEnvironment(ctx, ao, &env)
	if ar == nil {
		return nil, err
	}
	if ar.Releases == nil {
		return []AppliedRelease{}, err // applied, nothing to report
	}
	return ar.Releases, err
}

// WaitHealthy waits for the releases the environment's apply rendered.
func (s rolloutSteps) WaitHealthy(ctx context.Context, env FleetEnvironment, applied []AppliedRelease, timeout time.Duration) (bool, string, []string) {
	return waitHealthy(ctx, s.opts.ClusterOptions, s.opts.Selection.ForEnvironment(env.Name), timeout, narration(s.opts.HealthWaiting, applied), renderedOf(applied))
}

// Unhealthy reads the environment's health once.
func (s rolloutSteps) Unhealthy(ctx context.Context, env FleetEnvironment) string {
	st, err := Status(ctx, StatusOptions{Target: Target{Selection: s.opts.Selection.ForEnvironment(env.Name)}, ClusterOptions: s.opts.ClusterOptions})
	switch {
	case err != nil:
		return "cannot be read: " + err.Error()
	case !st.Healthy:
		return unhealthyObjects(st)
	}
	return ""
}

// Smoke runs the smoke test of a healthy environment on its own cluster.
func (s rolloutSteps) Smoke(ctx context.Context, env FleetEnvironment, timeout time.Duration) (*SmokeResult, error) {
	sr, err := Smoke(ctx, SmokeOptions{Selection: s.opts.Selection.ForEnvironment(env.Name), ClusterOptions: s.opts.ClusterOptions, Timeout: timeout, ownCluster: true})
	if err != nil || sr.Passed {
		return sr, err
	}
	var failed []string
	for _, r := range sr.Releases {
		if !r.Passed {
			failed = append(failed, r.Name+" at "+r.FailedStep)
		}
	}
	return sr, fmt.Errorf("smoke test failed: %s", strings.Join(failed, ", "))
}

// waitHealthy waits up to timeout for every release of an environment to
// be healthy, all at once; when they are not, it says why.
// The releases an apply just rendered (renderedOf) are waited for as they
// are; without them, the selection is rendered again for its identities.
func waitHealthy(ctx context.Context, co ClusterOptions, sel Selection, timeout time.Duration, w rollout.Narration, rendered []*render.Release) (healthy bool, why string, unhealthy []string) {
	st, err := Status(ctx, StatusOptions{Target: Target{Selection: sel}, ClusterOptions: co, Wait: true, Timeout: timeout, Progress: w.Progress(), rendered: rendered})
	if st != nil && !st.Healthy {
		unhealthy = []string{}
		for _, r := range st.Releases {
			if !r.Healthy {
				unhealthy = append(unhealthy, r.Name)
			}
		}
	}
	switch {
	case st != nil && st.Healthy:
		return true, "", nil
	case err != nil && st == nil:
		return false, err.Error(), nil
	case err != nil:
		return false, err.Error(), unhealthy // says how long it waited, and for what
	}
	return false, fmt.Sprintf("not healthy within %s", timeout), unhealthy
}

// narration narrates a wait for releases to say, counting each release's
// objects.
func narration(say func(string), releases []AppliedRelease) rollout.Narration {
	totals := map[string]int{}
	for _, r := range releases {
		totals[r.Name] += len(r.Applied)
	}
	return rollout.Narrate(say, totals)
}

// unhealthyObjects lists a status's objects that are not Current.
func unhealthyObjects(st *StatusResult) string {
	var out []string
	for _, rs := range st.Releases {
		for _, c := range rs.Components {
			for _, o := range c.Objects {
				if o.Health != "Current" {
					out = append(out, fmt.Sprintf("%s/%s %s: %s", o.Kind, o.Name, o.Health, o.Reason))
				}
			}
		}
	}
	return strings.Join(out, "; ")
}

// waitGates checks env's gates as opts asks (rollout.Gates): the commit
// of dir against what each gating environment runs.
func waitGates(ctx context.Context, opts ApplyOptions, env FleetEnvironment, dir string) error {
	g := rollout.Gates{Dir: dir, Shown: opts.Selection.Dir, Timeout: opts.GateTimeout, Waiting: opts.GateWaiting}
	return g.Wait(ctx, env, gateReads{opts})
}

// gateReads read a gated environment's releases and their gating
// environments' status.
type gateReads struct{ opts ApplyOptions }

// Releases are the release keys the gated selection renders.
func (g gateReads) Releases(ctx context.Context) ([]string, error) {
	r, err := Render(ctx, RenderOptions{Selection: g.opts.Selection})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, rel := range r.Releases {
		keys = append(keys, rel.release.Key)
	}
	return keys, nil
}

// Gate reads one release in one gating environment.
func (g gateReads) Gate(ctx context.Context, gate, key string) ([]rollout.GateRelease, error) {
	sel := g.opts.Selection.ForEnvironment(gate)
	sel.Releases = []string{key}
	st, err := Status(ctx, StatusOptions{Target: Target{Selection: sel}, ClusterOptions: g.opts.ClusterOptions})
	if st == nil {
		return nil, err
	}
	var out []rollout.GateRelease
	for _, rs := range st.Releases {
		out = append(out, rollout.GateRelease{ChangeID: rs.ChangeID, Source: rs.Source, Healthy: rs.Healthy, Since: rs.Since})
	}
	return out, err
}

// gatesOf is the environment a selection applies to, with its gates
// (none without an environment, or for a selection of several: Deploy
// routes those to Rollout before). An environment nobody declares is left
// for the render to report.
func gatesOf(ctx context.Context, sel Selection, known *FleetEnvironment) FleetEnvironment {
	if sel.Environment == "" && sel.Group == "" {
		return FleetEnvironment{}
	}
	if known != nil && known.Name == sel.Environment {
		return *known
	}
	if envs, err := Fleet(ctx, sel); err == nil && len(envs) == 1 && envs[0].Name == sel.Environment {
		return envs[0]
	}
	return FleetEnvironment{}
}
