package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newHistoryCmd() *cobra.Command {
	var (
		env, namespace string
		cluster        clusterFlags
		output         string
	)
	cmd := &cobra.Command{
		Use:   "history RELEASE [DIR] | history RELEASE -n NS",
		Short: "List the changes recorded in a release's inventory",
		Long: `List the changes the release's inventory Secret records, newest first (the current
one marked *): change id, when it was applied, manifest digest, object count and
where it came from (git ref, commit, whether the deployment directory was dirty, and
the CI run). The release is RELEASE of the deployment directory DIR (default ".") in
--env, or, with --namespace, the release named RELEASE in that namespace (no
directory needed). A release that was never applied is not found (exit 5).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.RangeArgs(1, 2)(cmd, args); err != nil {
				return usageError{err}
			}
			if namespace != "" && len(args) > 1 {
				return usageError{fmt.Errorf("give either a deployment directory or --namespace, not both")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return usageError{fmt.Errorf("-o must be table or json, not %q", output)}
			}
			t := pipeline.Target{Name: args[0], Namespace: namespace}
			if namespace == "" {
				t = pipeline.Target{Selection: (&selectionFlags{env: env, releases: args[:1]}).selection(args[1:])}
			}
			res, err := pipeline.History(cmd.Context(), pipeline.HistoryOptions{Target: t, ClusterOptions: cluster.options()})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprint(cmd.OutOrStdout(), report.HistoryTable(res))
			return nil
		},
	}
	cmd.Flags().StringVarP(&env, "env", "e", "", "environment the release is deployed in")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the release, instead of a deployment directory")
	cluster.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
