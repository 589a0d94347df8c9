package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
)

func newPlanCmd() *cobra.Command {
	var (
		sel    selectionFlags
		output string
	)
	cmd := &cobra.Command{
		Use: "plan [DIR]",
		Example: `  opm plan examples
  opm plan examples -o json`,
		Short: "Lay a fleet's environments out in waves, as CI matrices",
		Long: `List the environments --env or --group selects (default every environment the
deployment directory declares) in rollout order: wave, environment, group and the
environments that gate it. -o json prints what the GitHub Action's plan mode
outputs: {"matrix": {"include": [...]}, "waves": [...], "waveMatrices": {...}}.
Reads only the deployment directory.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			s := sel.selection(args)
			p, err := pipeline.PlanFleet(cmd.Context(), s)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			envs, err := pipeline.Fleet(cmd.Context(), pipeline.Selection{Dir: s.Dir, Environment: joinEnvs(p)})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WAVE\tENVIRONMENT\tGROUP\tAFTER")
			for _, e := range envs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Wave, e.Name, orDash(e.Group), orDash(joinList(e.Gates)))
			}
			return tw.Flush()
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func joinEnvs(p *pipeline.Plan) string {
	var names []string
	for _, e := range p.Matrix.Include {
		names = append(names, e.Environment)
	}
	return joinList(names)
}

func joinList(s []string) string { return strings.Join(s, ",") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
