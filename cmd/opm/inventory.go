package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newInventoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "inventory",
		Example: `  opm inventory repair examples --env staging --release blog --dry-run`,
		Short:   "Maintain release inventory Secrets",
	}
	cmd.AddCommand(newInventoryRepairCmd())
	return cmd
}

func newInventoryRepairCmd() *cobra.Command {
	var (
		sel     selectionFlags
		cluster clusterFlags
		lf      lockFlags
		opts    pipeline.RepairOptions
		output  string
	)
	cmd := &cobra.Command{
		Use:     "repair [DIR]",
		Example: `  opm inventory repair examples --env staging --release blog --dry-run`,
		Short:   "Rebuild a release's inventory from its labelled objects and its render",
		Long: `Rebuild the inventory Secret of each selected release — the way out of a corrupt
inventory, which every other command refuses to use. Under the release lock, the
new inventory records what the release renders now plus every object on the cluster
that carries the release's id (module-release.opmodel.dev/uuid), as one change. The
old Secret's data is first copied into a backup Secret (<name>.backup-<unix time>).
Objects found but no longer rendered are stale: the next apply prunes them.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Selection = sel.selection(args)
			opts.ClusterOptions = cluster.options()
			var err error
			if opts.Locking, err = lf.locking(cmd); err != nil {
				return err
			}
			res, err := pipeline.Repair(cmd.Context(), opts)
			if res != nil {
				if output == "json" {
					if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
						return err
					}
				} else {
					for _, r := range res.Releases {
						if r.Error == "" {
							fmt.Fprintln(cmd.OutOrStdout(), report.RepairedLine(r))
						}
					}
				}
			}
			return err
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	lf.register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "report what the rebuilt inventory would record; write nothing")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
