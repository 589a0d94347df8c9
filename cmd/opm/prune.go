package main

import (
	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
)

func newPruneCmd() *cobra.Command {
	var (
		sel     selectionFlags
		cluster clusterFlags
		lf      lockFlags
		opts    pipeline.PruneOptions
		output  string
	)
	cmd := &cobra.Command{
		Use:     "prune [DIR]",
		Example: `  opm prune examples --env staging --dry-run`,
		Short:   "Delete what releases no longer render, without applying",
		Long: `Render the releases of a deployment directory (default ".") and delete each one's
stale set: the objects its inventory Secret records that the render no longer
produces. Nothing is applied. Stale Namespaces, PersistentVolumeClaims and
CustomResourceDefinitions are kept unless --prune-namespaces / --prune-pvcs /
--prune-crds, objects annotated helm.sh/resource-policy=keep always, a forbidden
delete is a warning, and
the inventory is rewritten without the deleted objects (kept ones stay recorded).
An empty render of a release that has objects is refused unless --force.

Exit codes: 0 ok, 1 general, 2 validation, 3 connectivity, 4 permission, 5 not found,
6 conflict (another run held the release's lock for all of --lock-timeout), 7 configuration (a
decryption key or secret input is missing or wrong).`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Selection = sel.selection(args)
			opts.ClusterOptions = cluster.options()
			var err error
			if opts.Locking, err = lf.locking(cmd); err != nil {
				return err
			}
			opts.Progress = progressPrinter(cmd, output)
			opts.ReleaseDone = summaryPrinter(cmd, output)
			res, err := pipeline.Prune(cmd.Context(), opts)
			return printApplyResult(cmd, output, res, err)
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	fs.BoolVar(&opts.DryRun, "dry-run", false, "server-side dry run: report what would be pruned and skipped; write nothing")
	fs.BoolVar(&opts.Ghosts, "ghosts", false, "also prune ghosts: objects carrying this release's id that it neither records nor renders")
	fs.BoolVar(&opts.PruneNamespaces, "prune-namespaces", false, "allow pruning stale Namespaces, and everything in them")
	fs.BoolVar(&opts.PrunePVCs, "prune-pvcs", false, "allow pruning stale PersistentVolumeClaims, and their data")
	fs.BoolVar(&opts.PruneCRDs, "prune-crds", false, "allow pruning stale CustomResourceDefinitions, and every custom resource of their kinds")
	fs.BoolVar(&opts.Force, "force", false, "allow an empty render to prune everything the release recorded")
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
