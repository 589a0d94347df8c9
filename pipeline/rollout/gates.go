package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/inventory"
)

// Git is the commit a gated apply renders, read once per check.
type Git struct {
	Commit string
	Dirty  bool
	Err    error
}

// ReadGit reads the commit of the deployment directory dir.
func ReadGit(ctx context.Context, dir string) Git {
	st, err := gitref.StateOf(ctx, dir)
	return Git{Commit: st.Commit, Dirty: st.Dirty, Err: err}
}

// GateRelease is what a gate reads of one release in a gating
// environment: the change it runs, from where, and its health since when.
type GateRelease struct {
	ChangeID string
	Source   *inventory.Source
	Healthy  bool
	// Since is when it entered the health it has (RFC 3339, "" unknown).
	Since string
}

// GateReads are what a gate check reads from the clusters.
type GateReads interface {
	// Releases are the keys of the releases the gated environment renders.
	Releases(ctx context.Context) ([]string, error)
	// Gate reads release key in gating environment gate; a
	// fault.Validation error with nothing read means gate does not
	// declare that release.
	Gate(ctx context.Context, gate, key string) ([]GateRelease, error)
}

// Gates are how a gated apply checks its gates.
type Gates struct {
	// Dir is the deployment directory, whose git commit is compared;
	// Shown is it as the user named it, for the commands a refusal names.
	Dir, Shown string
	// Timeout, when > 0, keeps checking until the gates pass or it is up;
	// Waiting hears each refusal waited out.
	Timeout time.Duration
	Waiting func(refusal error)
}

// Wait checks env's gates, and with g.Timeout keeps checking until they
// pass or the time is up. A gate that can never pass (no git checkout,
// uncommitted changes) is refused at once. A refusal is a fault.Gate
// error that names the next step.
func (g Gates) Wait(ctx context.Context, env fleet.Environment, reads GateReads) error {
	start := time.Now()
	deadline := start.Add(g.Timeout)
	delay := 2 * time.Second
	for {
		src := ReadGit(ctx, g.Dir)
		err := g.check(ctx, env, src, reads)
		if err == nil || g.Timeout <= 0 || fault.KindOf(err) != fault.Gate || src.Err != nil || src.Dirty {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fault.Wrap(fault.Gate, fmt.Errorf("waited %s (--gate-timeout %s) for the gates of environment %s: %w",
				time.Since(start).Round(time.Second), g.Timeout, env.Name, err))
		}
		if g.Waiting != nil {
			g.Waiting(fmt.Errorf("environment %s: waiting for its promotion gates, %s of --gate-timeout %s left: %w", env.Name, left.Round(time.Second), g.Timeout, err))
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

// check refuses to apply env unless every release it renders runs, in
// every gating environment, a change recorded from the same commit, and
// is healthy now. Only the commit is compared, so a shallow clone (depth
// 1) is enough; a directory outside git, or with uncommitted changes,
// never passes a gate.
func (g Gates) check(ctx context.Context, env fleet.Environment, src Git, reads GateReads) error {
	switch {
	case src.Err != nil:
		return fault.Wrap(fault.Gate, fmt.Errorf("environment %s is gated by %s, and gates compare git commits: the deployment directory must be a git checkout (any depth; actions/checkout's default depth 1 is enough): %w", env.Name, strings.Join(env.Gates, ", "), src.Err))
	case src.Dirty:
		return fault.Gatef("environment %s is gated by %s: the deployment directory has uncommitted changes, which no gating environment can have run; commit them and apply the commit there first", env.Name, strings.Join(env.Gates, ", "))
	}
	releases, err := reads.Releases(ctx)
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
	for _, gate := range env.Gates {
		for _, key := range releases {
			rels, err := reads.Gate(ctx, gate, key)
			if err != nil && len(rels) == 0 {
				if fault.KindOf(err) == fault.Validation {
					continue // the gating environment does not declare this release
				}
				refusals = append(refusals, fmt.Sprintf("%s in %s: cannot be read: %v", key, gate, err))
				continue
			}
			for _, rs := range rels {
				if refusal, left := gateRefusal(rs, src.Commit, env.GateSoaks[gate], time.Now()); refusal != "" {
					refusals = append(refusals, fmt.Sprintf("%s in %s %s", key, gate, refusal))
					if rs.ChangeID != "" && rs.Source != nil && rs.Source.Commit == src.Commit && !rs.Source.Dirty && !rs.Healthy {
						unhealthy = appendNew(unhealthy, gate)
					} else if left == 0 {
						elsewhere = appendNew(elsewhere, gate)
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
			env.Name, gitref.Short(src.Commit), strings.Join(env.Gates, ", "), HasRun(env.Gates), strings.Join(refusals, "\n  "), wait, gateTimeoutFor(soakLeft))
	}
	if len(refusals) > 0 {
		dir := ShellQuote(cmp.Or(g.Shown, "."))
		var next []string
		if len(elsewhere) > 0 {
			next = append(next, fmt.Sprintf("opm apply %s --env %s   # then rerun, or wait here with --gate-timeout 30m (--skip-gates skips them, recorded)", dir, strings.Join(elsewhere, ",")))
		}
		if len(unhealthy) > 0 {
			// The commit runs there and is broken: applying it again would
			// change nothing. Say why, then go back or forward.
			gs := strings.Join(unhealthy, ",")
			next = append(next, fmt.Sprintf("opm status %s --env %s   # why it is not healthy; then roll %s back (opm history RELEASE %s --env %s lists its changes) or fix forward in a new commit, applied to %s first", dir, gs, gs, dir, gs, gs))
		}
		return fault.Gatef("environment %s may only get commit %s once %s %s it healthy:\n  %s\nnext: %s",
			env.Name, gitref.Short(src.Commit), strings.Join(env.Gates, ", "), HasRun(env.Gates), strings.Join(refusals, "\n  "), strings.Join(next, "\nnext: "))
	}
	return nil
}

// gateRefusal says why a gating environment's release does not open the
// gate for commit, or "" when it does: it runs a change from that commit,
// from a clean checkout, healthy, and (with a soak) healthy for at least
// that long. One fact per refusal: a release never applied has no health
// to report.
func gateRefusal(rs GateRelease, commit string, soak time.Duration, now time.Time) (string, time.Duration) {
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

// appendNew appends s unless list has it.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// HasRun is "has run" after one gating environment, "have run" after more.
func HasRun(gates []string) string {
	if len(gates) == 1 {
		return "has run"
	}
	return "have run"
}
