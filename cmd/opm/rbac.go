package main

import (
	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newRBACCmd() *cobra.Command {
	var (
		sel       selectionFlags
		cluster   clusterFlags
		output    string
		bootstrap bool
	)
	cmd := &cobra.Command{
		Use:     "rbac [DIR] --env ENV",
		Example: `  opm rbac examples --env staging --bootstrap | kubectl apply -f -   # as an administrator`,
		Short:   "Print the Roles and bindings an environment's impersonated identity needs for its releases",
		Long: `Render the releases for --env and print, as YAML for kubectl apply -f -, the Role and
RoleBinding (per namespace the release writes) and, for cluster-scoped objects, the
ClusterRole and ClusterRoleBinding that the identity of the environment's
cluster.impersonate needs to apply, diff, prune and lock exactly what the release
renders: its resources (resolved through the cluster's RESTMapper), its inventory
Secret and its Lease. Apply it as an administrator; then the release applies as the
tenant, and anything beyond it is refused by the API server. On a fresh cluster,
--bootstrap puts first the Namespaces and the ServiceAccount those rights need.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := pipeline.RBAC(cmd.Context(), pipeline.RBACOptions{Selection: sel.selection(args), ClusterOptions: cluster.options(), Bootstrap: bootstrap})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			y, err := report.RBACYAML(res)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(y)
			return err
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&bootstrap, "bootstrap", false, "also print, first, the Namespaces and the ServiceAccount the rights need on a fresh cluster")
	return cmd
}
