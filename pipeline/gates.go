package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/pipeline/rollout"
)

// GatesOptions are the options of Gates.
type GatesOptions struct {
	// Selection names one environment.
	Selection
	ClusterOptions
	// GateTimeout and GateWaiting are ApplyOptions' own: how long to wait
	// for the gates to pass, and who hears each refusal waited out.
	GateTimeout time.Duration       `json:"gateTimeout,omitempty"`
	GateWaiting func(refusal error) `json:"-"`
}

// GatesResult is what Gates found.
type GatesResult struct {
	Environment string `json:"environment"`
	// Gates are the environments it follows (rollout.after); none means
	// it has no promotion gates and passes at once.
	Gates []string `json:"gates,omitempty"`
	// Commit is the commit the gates were checked for.
	Commit string `json:"commit,omitempty"`
}

// Gates checks one environment's promotion gates without applying it,
// waiting up to GateTimeout for them to pass, exactly as Apply checks them
// first. It lets a workflow hold its approval-protected apply job until
// the environments it follows run this commit, healthy, so a reviewer is
// asked to approve a wave only once the waves before it are done. A
// refusal is a fault.Gate error, as Apply's.
func Gates(ctx context.Context, opts GatesOptions) (*GatesResult, error) {
	if opts.Environment == "" && opts.Group == "" {
		return nil, fault.Validationf("checking promotion gates needs an environment (--env NAME)")
	}
	if err := single(opts.Selection, "checking promotion gates"); err != nil {
		return nil, err
	}
	env := gatesOf(ctx, opts.Selection, nil)
	if env.Name == "" {
		// gatesOf leaves an undeclared environment for the render to name.
		if _, err := Render(ctx, RenderOptions{Selection: opts.Selection}); err != nil {
			return nil, err
		}
		return nil, fault.Validationf("environment %q is not declared", opts.Environment)
	}
	res := &GatesResult{Environment: env.Name, Gates: env.Gates}
	dir := opts.Selection.RenderOptions(ctx).Dir
	if len(env.Gates) == 0 {
		return res, nil
	}
	ao := ApplyOptions{Selection: opts.Selection, ClusterOptions: opts.ClusterOptions, GateTimeout: opts.GateTimeout, GateWaiting: opts.GateWaiting}
	if err := waitGates(ctx, ao, env, dir); err != nil {
		return nil, err
	}
	res.Commit = rollout.ReadGit(ctx, dir).Commit
	return res, nil
}

// Line is the one-line outcome.
func (r *GatesResult) Line() string {
	if len(r.Gates) == 0 {
		return fmt.Sprintf("environment %s has no promotion gates", r.Environment)
	}
	return fmt.Sprintf("environment %s may get commit %s: %s %s it healthy", r.Environment, gitref.Short(r.Commit), strings.Join(r.Gates, ", "), rollout.HasRun(r.Gates))
}
