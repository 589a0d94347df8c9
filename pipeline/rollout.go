package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/workers"
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
	// Next are the commands that take it on from a failure: fix and
	// rerun, apply a gate first, or roll back.
	Next []string `json:"next,omitempty"`

	// unhealthy names the releases a failed health wait found unhealthy
	// (nil: not known): only those are offered a rollback.
	unhealthy []string
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
	waves := byWave(envs)
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
				res.Environments[i] = rolloutEnvironment(ctx, opts, res.Environments[i])
			})
		}
		g.Wait()
		if soak := waveSoak(wave); soak > 0 && !opts.DryRun && !opts.NoWait && waveOK(res, idx) {
			soakWave(ctx, opts, res, idx, soak, w == len(waves)-1)
		}
		var failed []string
		for _, i := range idx {
			if r := res.Environments[i].Result; r != RolloutApplied && r != RolloutPlanned {
				// Each environment's error and next step are in the
				// result (the front doors print them once, under the
				// table); the error only says where the rollout stopped.
				res.Environments[i].Next = nextSteps(opts, res.Environments[i], false)
				failed = append(failed, fmt.Sprintf("%s (%s)", res.Environments[i].Name, r))
			}
		}
		if len(failed) > 0 {
			kind := fault.General
			for _, i := range idx {
				if res.Environments[i].Result == RolloutGated {
					kind = fault.Gate
				}
			}
			return res, fault.Wrap(kind, fmt.Errorf("wave %d stopped the rollout at %s; later waves were not started", wave[0].Wave, strings.Join(failed, ", ")))
		}
	}
	return res, nil
}

// rolloutEnvironment gates, applies and waits for one environment.
func rolloutEnvironment(ctx context.Context, opts RolloutOptions, re RolloutEnvironment) RolloutEnvironment {
	sel := opts.Selection.ForEnvironment(re.Name)
	ao := opts.ApplyOptions
	ao.Selection = sel
	ao.Wait = false // the wave waits, with the rollout's timeout
	ar, err := applyEnvironment(ctx, ao, &re.FleetEnvironment)
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
	opts.narrate("environment %s: waiting up to %s for its releases to become healthy", re.Name, timeout)
	start := time.Now()
	healthy, why, unhealthy := waitHealthy(ctx, opts.ClusterOptions, sel, timeout, narration(opts.HealthWaiting, re.Releases), renderedOf(re.Releases))
	re.unhealthy = unhealthy
	switch {
	case healthy:
		opts.narrate("environment %s: healthy after %s", re.Name, time.Since(start).Round(time.Second))
		re.Result = RolloutApplied
		if opts.Smoke {
			re = smokeEnvironment(ctx, opts, sel, timeout, re)
		}
	default:
		re.Result, re.Error = RolloutUnhealthy, why
	}
	return re
}

// narrate tells HealthWaiting, when set, what the rollout waits for.
func (o RolloutOptions) narrate(format string, args ...any) {
	if o.HealthWaiting != nil {
		o.HealthWaiting(fmt.Sprintf(format, args...))
	}
}

// waitHealthy waits up to timeout for every release of an environment to
// be healthy, all at once; when they are not, it says why.
// The releases an apply just rendered (renderedOf) are waited for as they
// are; without them, the selection is rendered again for its identities.
func waitHealthy(ctx context.Context, co ClusterOptions, sel Selection, timeout time.Duration, w healthNarration, rendered []*render.Release) (healthy bool, why string, unhealthy []string) {
	st, err := Status(ctx, StatusOptions{Target: Target{Selection: sel}, ClusterOptions: co, Wait: true, Timeout: timeout, Progress: w.progress(), rendered: rendered})
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

// healthNarration tells say, while a wait lasts, each object whose
// health changes and how far each release is: "blog: 3 of 5 objects
// healthy; deployment.apps/web: InProgress (…)". totals are the objects
// of each release, by name.
type healthNarration struct {
	say    func(string)
	totals map[string]int
	// start is when the wait began: each line says how long it has run,
	// so a reason (ImagePullBackOff) is seen as soon as it appears.
	start time.Time
}

func narration(say func(string), releases []AppliedRelease) healthNarration {
	totals := map[string]int{}
	for _, r := range releases {
		totals[r.Name] += len(r.Applied)
	}
	return healthNarration{say: say, totals: totals, start: time.Now()}
}

// progress is Status's Progress for w, or nil when nobody listens. An
// object is reported when it is not Current at first and whenever its
// health changes, so the healthy are the total less those last reported
// otherwise (Status calls it under one lock).
func (w healthNarration) progress() func(string, health.ObjectHealth) {
	if w.say == nil {
		return nil
	}
	pending := map[string]map[string]bool{}
	return func(release string, h health.ObjectHealth) {
		p := pending[release]
		if p == nil {
			p = map[string]bool{}
			pending[release] = p
		}
		if h.Status == health.Current {
			delete(p, h.Ref())
		} else {
			p[h.Ref()] = true
		}
		at := time.Since(w.start).Round(time.Second)
		if total, ok := w.totals[release]; ok && total > 0 {
			w.say(fmt.Sprintf("%s: %d of %d objects healthy after %s; %s", release, max(total-len(p), 0), total, at, h))
			return
		}
		w.say(fmt.Sprintf("%s: after %s, %s", release, at, h))
	}
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
	// soakLeft is the longest soak time left when every refusal is only a
	// soak still running; -1 once any refusal needs something else.
	var soakLeft time.Duration
	// unhealthy are the gating environments that run this very commit but
	// are not healthy: applying it there again changes nothing.
	var unhealthy, elsewhere []string
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
				if refusal, left := gateRefusal(rs, src.commit, env.GateSoaks[g], time.Now()); refusal != "" {
					refusals = append(refusals, fmt.Sprintf("%s in %s %s", key, g, refusal))
					if rs.ChangeID != "" && rs.Source != nil && rs.Source.Commit == src.commit && !rs.Source.Dirty && !rs.Healthy {
						unhealthy = appendNew(unhealthy, g)
					} else if left == 0 {
						elsewhere = appendNew(elsewhere, g)
					}
					if left > 0 && soakLeft >= 0 {
						soakLeft = max(soakLeft, left)
					} else {
						soakLeft = -1
					}
				}
			}
		}
	}
	if len(refusals) > 0 && soakLeft > 0 {
		// Only time is missing: applying the gating environment again would
		// change nothing (and no longer restarts its soak); waiting does.
		wait := soakLeft.Round(time.Second)
		return fault.Gatef("environment %s may only get commit %s once %s %s it healthy for its soak:\n  %s\nnext: the soak has %s left; wait for it here with --gate-timeout %s, or rerun then",
			env.Name, gitref.Short(src.commit), strings.Join(env.Gates, ", "), hasRun(env.Gates), strings.Join(refusals, "\n  "), wait, gateTimeoutFor(soakLeft))
	}
	if len(refusals) > 0 {
		dir := shellQuote(cmp.Or(sel.Dir, "."))
		var next []string
		if len(elsewhere) > 0 {
			next = append(next, fmt.Sprintf("opm apply %s --env %s   # then rerun, or wait here with --gate-timeout 30m (--skip-gates skips them, recorded)", dir, strings.Join(elsewhere, ",")))
		}
		if len(unhealthy) > 0 {
			// The commit runs there and is broken: applying it again would
			// change nothing. Say why, then go back or forward.
			g := strings.Join(unhealthy, ",")
			next = append(next, fmt.Sprintf("opm status %s --env %s   # why it is not healthy; then roll %s back (opm history RELEASE %s --env %s lists its changes) or fix forward in a new commit, applied to %s first", dir, g, g, dir, g, g))
		}
		return fault.Gatef("environment %s may only get commit %s once %s %s it healthy:\n  %s\nnext: %s",
			env.Name, gitref.Short(src.commit), strings.Join(env.Gates, ", "), hasRun(env.Gates), strings.Join(refusals, "\n  "), strings.Join(next, "\nnext: "))
	}
	return nil
}

// gateRefusal says why a gating environment's release does not open the
// gate for commit, or "" when it does: it runs a change from that commit,
// from a clean checkout, healthy, and (with a soak) healthy for at least
// that long. One fact per refusal: a release never applied has no health
// to report.
func gateRefusal(rs ReleaseStatus, commit string, soak time.Duration, now time.Time) (string, time.Duration) {
	health := "healthy"
	if !rs.Healthy {
		health = "not healthy"
	}
	switch {
	case rs.ChangeID == "":
		return "has never been applied", 0
	case rs.Source == nil || rs.Source.Commit == "":
		return fmt.Sprintf("runs change %s from no known commit (%s)", rs.ChangeID, health), 0
	case rs.Source.Dirty:
		return fmt.Sprintf("runs commit %s with uncommitted changes, change %s (%s)", gitref.Short(rs.Source.Commit), rs.ChangeID, health), 0
	case rs.Source.Commit != commit:
		return fmt.Sprintf("runs commit %s, change %s (%s)", gitref.Short(rs.Source.Commit), rs.ChangeID, health), 0
	case !rs.Healthy:
		return fmt.Sprintf("runs commit %s, change %s, but is not healthy", gitref.Short(rs.Source.Commit), rs.ChangeID), 0
	}
	if soak > 0 {
		since, err := time.Parse(time.RFC3339, rs.Since)
		if err != nil {
			return fmt.Sprintf("runs commit %s healthy, but since when is not known, and its soak is %s", gitref.Short(rs.Source.Commit), soak), 0
		}
		if healthy := now.Sub(since); healthy < soak {
			return fmt.Sprintf("runs commit %s, healthy for %s of its %s soak (%s left)", gitref.Short(rs.Source.Commit), healthy.Truncate(time.Second), soak, (soak - healthy).Round(time.Second)), soak - healthy
		}
	}
	return "", 0
}

// gateTimeoutFor is a --gate-timeout that outlasts a soak with left to
// go: rounded up to the minute, plus one.
func gateTimeoutFor(left time.Duration) time.Duration {
	return left.Truncate(time.Minute) + 2*time.Minute
}

// waitGates checks env's gates, and with opts.GateTimeout keeps checking
// until they pass or the time is up. A gate that can never pass (no git
// checkout, uncommitted changes) is refused at once.
func waitGates(ctx context.Context, opts ApplyOptions, env FleetEnvironment, dir string) error {
	start := time.Now()
	deadline := start.Add(opts.GateTimeout)
	delay := 2 * time.Second
	for {
		src := readGitState(ctx, dir)
		err := checkGates(ctx, opts, env, src)
		if err == nil || opts.GateTimeout <= 0 || fault.KindOf(err) != fault.Gate || src.err != nil || src.dirty {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fault.Wrap(fault.Gate, fmt.Errorf("waited %s (--gate-timeout %s) for the gates of environment %s: %w",
				time.Since(start).Round(time.Second), opts.GateTimeout, env.Name, err))
		}
		if opts.GateWaiting != nil {
			opts.GateWaiting(fmt.Errorf("environment %s: waiting for its promotion gates, %s of --gate-timeout %s left: %w", env.Name, left.Round(time.Second), opts.GateTimeout, err))
		}
		// The last check comes at the deadline, not a whole delay before it.
		timer := time.NewTimer(min(delay, left))
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

// waveOK reports whether every environment of a wave was applied.
func waveOK(res *RolloutResult, idx []int) bool {
	for _, i := range idx {
		if res.Environments[i].Result != RolloutApplied {
			return false
		}
	}
	return true
}

// waveSoak is the longest rollout.soak of a wave's environments.
func waveSoak(wave []FleetEnvironment) time.Duration {
	var d time.Duration
	for _, e := range wave {
		d = max(d, e.Soak)
	}
	return d
}

// soakWave keeps checking a healthy wave for soak, as Kargo verifies a
// stage before promoting further: every environment must stay healthy
// throughout and at the end, or it is marked unhealthy with what broke.
func soakWave(ctx context.Context, opts RolloutOptions, res *RolloutResult, idx []int, soak time.Duration, lastWave bool) {
	interval := min(max(soak/6, time.Second), 10*time.Second)
	if opts.soakInterval > 0 {
		interval = opts.soakInterval
	}
	start := time.Now()
	deadline := start.Add(soak)
	names := make([]string, 0, len(idx))
	for _, i := range idx {
		names = append(names, res.Environments[i].Name)
	}
	who := "environment " + strings.Join(names, ", ")
	until := "before the next wave"
	if lastWave {
		until = "before the rollout ends"
	}
	opts.narrate("%s: healthy; soaking for %s (rollout.soak) %s, checked every %s", who, soak, until, interval)
	for {
		last := !time.Now().Before(deadline)
		if !last {
			timer := time.NewTimer(min(interval, time.Until(deadline)))
			select {
			case <-ctx.Done():
				timer.Stop()
				for _, i := range idx {
					res.Environments[i].Result, res.Environments[i].Error = RolloutUnhealthy, "soak interrupted: "+ctx.Err().Error()
				}
				return
			case <-timer.C:
			}
		}
		broken := false
		for _, i := range idx {
			e := &res.Environments[i]
			st, err := Status(ctx, StatusOptions{Target: Target{Selection: opts.Selection.ForEnvironment(e.Name)}, ClusterOptions: opts.ClusterOptions})
			if err == nil && st.Healthy {
				continue
			}
			why := "cannot be read"
			if err != nil {
				why += ": " + err.Error()
			} else {
				why = unhealthyObjects(st)
			}
			e.Result = RolloutUnhealthy
			e.Error = fmt.Sprintf("became unhealthy %s into its %s soak: %s", time.Since(start).Truncate(time.Second), soak, why)
			broken = true
		}
		if broken || last {
			return
		}
		opts.narrate("%s: healthy, %s of its %s soak left", who, max(time.Until(deadline).Round(time.Second), 0), soak)
		if opts.soakProbe != nil {
			opts.soakProbe()
		}
	}
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

// nextSteps are the exact commands that take a failed environment on.
// Published (text CI prints as it is), a sensitive release's change ID
// stays out: the rollback is named through opm history instead.
func nextSteps(opts RolloutOptions, e RolloutEnvironment, published bool) []string {
	dir := shellQuote(cmp.Or(opts.shownDir, opts.Selection.Dir, "."))
	apply := fmt.Sprintf("opm apply %s --env %s", dir, e.Name)
	switch e.Result {
	case RolloutGated:
		return nil // the refusal names its own next step
	case RolloutFailed:
		return []string{"fix what the error names, commit, and rerun: " + apply}
	}
	// Unhealthy or failed its smoke test: roll back what this run changed
	// (to the change it ran before), or fix forward. A release the run
	// left as it was is not where the failure came from.
	var next []string
	for _, r := range e.Releases {
		prev := r.Inventory.Previous
		switch {
		case e.unhealthy != nil && !slices.Contains(e.unhealthy, r.Name):
			// Healthy: not where the failure is, whatever this run changed.
		case prev == "" || prev == r.ChangeID || !r.Inventory.Written:
		case r.Sensitive && published:
			// A sensitive release's change IDs stay out of text that CI
			// publishes (the error of a deploy job); history shows it.
			next = append(next, fmt.Sprintf("opm history %s %s --env %s   # then opm rollback %s to the change before this one", r.Name, dir, e.Name, r.Name))
		default:
			next = append(next, fmt.Sprintf("opm rollback %s %s --env %s --to %s   # back to what ran before", r.Name, dir, e.Name, prev))
		}
	}
	if len(next) == 0 {
		return []string{"fix forward: commit a fix and rerun: " + apply}
	}
	return append(next, "or fix forward: commit a fix and rerun: "+apply)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// appendNew appends s unless list has it.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// hasRun is "has run" after one gating environment, "have run" after more.
func hasRun(gates []string) string {
	if len(gates) == 1 {
		return "has run"
	}
	return "have run"
}
