package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
)

func newGatesCmd() *cobra.Command {
	var (
		sel     selectionFlags
		cluster clusterFlags
		opts    pipeline.GatesOptions
	)
	cmd := &cobra.Command{
		Use:     "gates [DIR] --env NAME",
		Example: `  opm gates examples --env production --gate-timeout 30m`,
		Short:   "Check (or wait for) an environment's promotion gates without applying",
		Long: `Check the promotion gates of one environment (rollout.after) as opm apply checks
them first: every release it renders runs, in each environment it follows, a change
from this commit, healthy (and, with a soak, healthy for that long). Nothing is
applied. With --gate-timeout, wait up to that long for them to pass, saying on
stderr what is still missing.

A workflow runs it in a job of its own before the environment's approval-protected
apply job, so a reviewer is asked to approve a wave only once the waves before it
ran the commit (docs/fleets.md). Exit 0 when the gates pass (or there are none),
8 when they do not.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Selection = sel.selection(args)
			opts.ClusterOptions = cluster.options()
			opts.GateWaiting = func(refusal error) { fmt.Fprintln(cmd.ErrOrStderr(), refusal) }
			res, err := pipeline.Gates(cmd.Context(), opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Line())
			return nil
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	cmd.Flags().DurationVar(&opts.GateTimeout, "gate-timeout", 0, "wait up to this long for the promotion gates to pass instead of refusing at once (0: refuse at once)")
	return cmd
}
