package pipeline

import (
	"context"
	"time"
)

// DeployResult is what Deploy did: Apply's result when the selection was
// one environment (or none), Rollout's when it was a fleet. One of the two
// is set.
type DeployResult struct {
	Apply   *ApplyResult
	Rollout *RolloutResult
}

// Deploy applies a selection the way its shape asks, so that every front
// door routes "apply" the same way: one environment (or a release without
// one) is applied — its promotion gates checked first — and waited for
// until healthy (Timeout) unless NoWait; a fleet (a group, a comma list,
// or one Wave) is rolled out wave by wave (Rollout). The fleet is read
// once: the environment found is what Apply checks the gates of.
func Deploy(ctx context.Context, opts RolloutOptions) (*DeployResult, error) {
	return deploy(ctx, opts, !opts.NoWait, opts.Timeout, false)
}

// deploy is the one place that routes between one environment and a
// rollout. Apply waits as its options say (wait, timeout), and, for a
// selection that names no fleet, lets the render say what is wrong with
// the environment (lenient) rather than the fleet.
func deploy(ctx context.Context, opts RolloutOptions, wait bool, timeout time.Duration, lenient bool) (*DeployResult, error) {
	envs, err := Fleet(ctx, opts.Selection)
	if err != nil && (!lenient || opts.Selection.IsFleet()) {
		return nil, err
	}
	if len(envs) > 1 || opts.Wave != nil {
		rr, err := Rollout(ctx, opts)
		if rr == nil {
			return nil, err
		}
		return &DeployResult{Rollout: rr}, err
	}
	ao := opts.ApplyOptions
	ao.Wait, ao.WaitTimeout = wait, timeout
	var known *FleetEnvironment
	if len(envs) == 1 {
		ao.Selection = ao.Selection.ForEnvironment(envs[0].Name)
		known = &envs[0]
	}
	res, err := applyEnvironment(ctx, ao, known)
	if res == nil {
		return nil, err
	}
	return &DeployResult{Apply: res}, err
}
