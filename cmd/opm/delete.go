package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newDeleteCmd() *cobra.Command {
	var (
		tf      targetFlags
		cluster clusterFlags
		lf      lockFlags
		opts    pipeline.DeleteOptions
		output  string
	)
	cmd := &cobra.Command{
		Use: "delete [DIR] | --name NAME -n NS | --release-id ID -n NS",
		Example: `  opm delete examples --env staging --dry-run
  opm delete --name blog -n staging`,
		Short: "Delete releases: their objects, then their inventory",
		Long: `Delete the objects a release's inventory records, in reverse apply order, then the
inventory Secret. Without an inventory, the objects found by the release's labels are
deleted instead. Namespaces, PersistentVolumeClaims and CustomResourceDefinitions
are kept unless --prune-namespaces / --prune-pvcs / --prune-crds, and objects
annotated helm.sh/resource-policy=keep always, as for apply; the inventory then
stays with just them. A second delete finds nothing and says so.

Select releases with a deployment directory ([DIR] --env --release) or with
--namespace and --name and/or --release-id.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tf.target(args)
			if err != nil {
				return err
			}
			if !t.ByName() && len(args) == 0 && !cmd.Flags().Changed("env") && !cmd.Flags().Changed("release") {
				return usageError{fmt.Errorf("say what to delete: a deployment directory (opm delete DIR --env E), or --namespace with --name or --release-id")}
			}
			opts.Target, opts.ClusterOptions = t, cluster.options()
			if opts.Locking, err = lf.locking(cmd); err != nil {
				return err
			}
			if output == "text" {
				opts.Progress = func(e pipeline.ProgressEvent) { fmt.Fprintln(cmd.OutOrStdout(), e.Line()) }
			}
			res, err := pipeline.Delete(cmd.Context(), opts)
			if res != nil {
				if output == "json" {
					if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
						return err
					}
				} else {
					for _, r := range res.Releases {
						for _, w := range r.Warnings {
							fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
						}
						fmt.Fprintln(cmd.OutOrStdout(), report.DeletedLine(r))
					}
				}
			}
			return err
		},
	}
	tf.register(cmd.Flags())
	cluster.register(cmd.Flags())
	lf.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "list what would be deleted (server dry run), deleting nothing")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the deleted objects are gone")
	cmd.Flags().BoolVar(&opts.PruneNamespaces, "prune-namespaces", false, "also delete Namespaces the release recorded (and everything in them)")
	cmd.Flags().BoolVar(&opts.PrunePVCs, "prune-pvcs", false, "also delete PersistentVolumeClaims (their data)")
	cmd.Flags().BoolVar(&opts.PruneCRDs, "prune-crds", false, "also delete CustomResourceDefinitions (every custom resource of their kinds)")
	return cmd
}
