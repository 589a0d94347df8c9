package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newHistoryCmd() *cobra.Command {
	var (
		env, namespace string
		group          string
		cluster        clusterFlags
		output         string
	)
	cmd := &cobra.Command{
		Use: "history RELEASE [DIR] | history DIR | history RELEASE -n NS | history [DIR] --group G",
		Example: `  opm history blog examples --env staging
  opm history examples --env staging
  opm history examples --group production`,
		Short: "List the changes recorded in a release's inventory",
		Long: `List the changes the release's inventory Secret records, newest first (the current
one marked *): change id, when it was applied, manifest digest, object count and
where it came from (git ref, commit, whether the deployment directory was dirty, and
the CI run). The release is RELEASE of the deployment directory DIR (default ".") in
--env, or, with --namespace, the release named RELEASE in that namespace (no
directory needed). A lone argument that is a deployment directory (it holds
cue.mod/) lists every release of --env in it. A release that was never applied is
not found (exit 5).

--group lists every release of each environment of the group, in wave order; an
--env naming a group or a comma list lists RELEASE in each of its environments.`,
		Args: func(cmd *cobra.Command, args []string) error {
			check := cobra.RangeArgs(1, 2)
			if group != "" {
				check = cobra.MaximumNArgs(1) // [DIR]
			}
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			if namespace != "" && group != "" {
				return usageError{fmt.Errorf("give either --group or --namespace, not both")}
			}
			if namespace != "" && len(args) > 1 {
				return usageError{fmt.Errorf("give either a deployment directory or --namespace, not both")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var t pipeline.Target
			switch {
			case group != "":
				t = pipeline.Target{Selection: (&selectionFlags{group: group}).selection(args)}
			case namespace != "":
				t = pipeline.Target{Name: args[0], Namespace: namespace}
			case len(args) == 1 && isDeploymentDir(args[0]):
				// `opm history . --env production`: a directory, not a
				// release name; every release of the environment.
				t = pipeline.Target{Selection: (&selectionFlags{env: env}).selection(args)}
			default:
				t = pipeline.Target{Selection: (&selectionFlags{env: env, releases: args[:1]}).selection(args[1:])}
			}
			res, err := pipeline.History(cmd.Context(), pipeline.HistoryOptions{Target: t, ClusterOptions: cluster.options()})
			if res == nil {
				return err
			}
			if output == "json" {
				if encErr := writeJSON(cmd.OutOrStdout(), res); encErr != nil {
					return encErr
				}
				return err
			}
			// Sealed before the table is laid out, so its columns fit the
			// sealed digests and change IDs, not the ones they replace.
			redact.From(cmd.Context()).Value(res)
			fmt.Fprint(cmd.OutOrStdout(), report.HistoryTable(res))
			return err
		},
	}
	cmd.Flags().StringVarP(&env, "env", "e", "", "environment the release is deployed in (a group or a comma list lists a fleet)")
	cmd.Flags().StringVar(&group, "group", "", "every environment of this group, in wave order")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the release, instead of a deployment directory")
	cluster.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// isDeploymentDir reports whether arg names a deployment directory (one
// holding cue.mod/) rather than a release: release names cannot contain
// "/" or be ".", and a directory of that name is taken as meant.
func isDeploymentDir(arg string) bool {
	fi, err := os.Stat(filepath.Join(arg, "cue.mod"))
	return err == nil && fi.IsDir()
}
