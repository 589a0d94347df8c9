package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/workers"
)

// A fleet rollback's results, beside Run's.
const (
	RolledBack   = "rolled back"
	AlreadyThere = "already there"
)

// Move is one release of an environment going back to an earlier change.
type Move struct {
	Release string // its key
	To      string // the change ID
}

// BackSteps are what a fleet's rollback does to one environment.
type BackSteps[R AppliedRelease] interface {
	// Back returns one release of env to a change, as an apply; the
	// releases are what that apply did (nil when it reached nothing).
	Back(ctx context.Context, env fleet.Environment, m Move) ([]R, error)
	// WaitHealthy waits up to timeout for env to be healthy; when it is
	// not, it says why.
	WaitHealthy(ctx context.Context, env fleet.Environment, timeout time.Duration) (healthy bool, why string)
}

// BackOptions are how Back goes.
type BackOptions struct {
	// DryRun plans: nothing is waited for.
	DryRun bool
	// Timeout bounds each environment's wait for health.
	Timeout time.Duration
	// Rerun is the command that takes a failed rollback on, once fixed.
	Rerun string
}

// Back returns a fleet (envs, sorted by wave) to where moves say, the
// waves in reverse order — the last wave first, each healthy before the
// one before it — so that an environment never runs an older commit
// than one it gates. An environment without moves is already there. The
// first failure stops it: earlier waves are left as they run.
func Back[R AppliedRelease, S any](ctx context.Context, envs []fleet.Environment, moves map[string][]Move, steps BackSteps[R], opts BackOptions) (*Result[R, S], error) {
	res := &Result[R, S]{}
	for i := len(envs) - 1; i >= 0; i-- {
		res.Environments = append(res.Environments, EnvironmentResult[R, S]{FleetEnvironment: envs[i], Result: NotStarted})
	}
	at := 0
	waves := fleet.Waves(envs)
	for w := len(waves) - 1; w >= 0; w-- {
		idx := make([]int, len(waves[w]))
		for k := range idx {
			idx[k] = at + k
		}
		at += len(idx)
		for _, k := range idx {
			re := &res.Environments[k]
			re.Result = AlreadyThere
			for _, m := range moves[re.Name] {
				releases, err := steps.Back(ctx, re.FleetEnvironment, m)
				re.Releases = append(re.Releases, releases...)
				for _, r := range releases {
					if re.ChangeIDs == nil {
						re.ChangeIDs = map[string]string{}
					}
					rr := r.RolloutRelease()
					re.ChangeIDs[rr.Name] = rr.ChangeID
				}
				if err != nil {
					re.Result, re.Error = Failed, err.Error()
					re.Next = []string{"fix what the error names and rerun: " + opts.Rerun}
					return res, fault.Wrap(fault.KindOf(err), fmt.Errorf("wave %d stopped the rollback at %s; earlier waves were not rolled back", re.Wave, re.Name))
				}
				re.Result = RolledBack
				if opts.DryRun {
					re.Result = Planned
				}
			}
		}
		if opts.DryRun {
			continue
		}
		var g workers.Group
		for _, k := range idx {
			if res.Environments[k].Result != RolledBack {
				continue
			}
			g.Go(func() {
				re := &res.Environments[k]
				if healthy, why := steps.WaitHealthy(ctx, re.FleetEnvironment, opts.Timeout); !healthy {
					re.Result, re.Error = Unhealthy, why
				}
			})
		}
		g.Wait()
		for _, k := range idx {
			if re := &res.Environments[k]; re.Result == Unhealthy {
				return res, fmt.Errorf("wave %d stopped the rollback at %s (unhealthy); earlier waves were not rolled back", re.Wave, re.Name)
			}
		}
	}
	return res, nil
}
