package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
)

// gates runs gates mode: one environment's promotion gates checked, and
// with gate-timeout waited for, without applying it. A workflow's gate
// job runs it before the environment's approval-protected apply job, so
// the approval is asked for only once the waves before it ran the commit.
func (r *runner) gates(ctx context.Context) error {
	if len(r.cfg.environments) != 1 || strings.Contains(r.cfg.environments[0], ",") {
		return fmt.Errorf("gates mode checks one environment: set environments to one name (the plan's matrix.environment), not %q", strings.Join(r.cfg.environments, ","))
	}
	env := r.cfg.environments[0]
	res, err := pipeline.Gates(ctx, pipeline.GatesOptions{
		Selection:      r.selection(env),
		ClusterOptions: pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
		GateTimeout:    r.cfg.gateTimeout,
		GateWaiting:    func(refusal error) { r.infof("%s", refusal) },
	})
	if err != nil {
		return fmt.Errorf("promotion gates of environment %s: %w", env, err)
	}
	line := res.Line()
	r.infof("%s", line)
	r.addSummary("### opm gates: " + cell(env) + "\n\n✅ " + cell(line) + "\n\n" + r.info.Footer() + "\n")
	return nil
}
