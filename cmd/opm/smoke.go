package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newSmokeCmd() *cobra.Command {
	var (
		sel     selectionFlags
		cluster clusterFlags
		opts    pipeline.SmokeOptions
		output  string
	)
	cmd := &cobra.Command{
		Use:     "smoke [DIR] --env E",
		Example: `  opm smoke examples --env staging`,
		Short:   "Smoke-test releases on a throwaway cluster: apply, healthy, idempotent, delete, nothing left",
		Long: `Deploy each selected release to a fresh namespace of a throwaway cluster (kind, k3s)
and check it: apply → every object healthy (kstatus, within --timeout) → a second
apply would change nothing (server-side diff) → delete → no inventory and no object
with the release's labels left. Each step is timed; the first failure stops the
release's test, reports the unhealthy objects' conditions and the namespace's recent
Events (Secret values masked), and still deletes what it created unless --keep.

The release's own namespace is replaced by <prefix>-<release>-<random>, so parallel
runs never collide; the release id follows the namespace. The environment's cluster
settings are ignored: the cluster is --kubeconfig/--context, else the current context.
A context whose name or server is the environment's own kubeContext is refused unless
--i-know-this-is-a-real-cluster.

--env may name a group or a list (--group G, --env a,b): each environment's
releases are tested in turn, in rollout order, on the same throwaway cluster.

Exit 0 when every release passed, 1 when a check failed, 2 for bad input, 3 when the
cluster cannot be reached, 4 without permission.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sel.env == "" && sel.group == "" {
				return usageError{fmt.Errorf("--env is required: a smoke test deploys the releases as one environment renders them")}
			}
			opts.Selection = sel.selection(args)
			opts.ClusterOptions = cluster.options()
			opts.OnStep = func(p pipeline.SmokeProgress) { fmt.Fprintln(cmd.ErrOrStderr(), report.SmokeProgressLine(p)) }
			res, err := pipeline.Smoke(cmd.Context(), opts)
			if res == nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				if err := writeJSON(out, res); err != nil {
					return err
				}
			case "markdown":
				fmt.Fprint(out, report.SmokeMarkdown(res, report.MarkdownOptions{}))
			default:
				fmt.Fprint(out, report.SmokeText(res))
			}
			if err != nil {
				return err
			}
			if !res.Passed {
				return exitError{code: 1}
			}
			return nil
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	// A smoke test never uses an environment's own cluster settings.
	cmd.Flags().Lookup("kubeconfig").Usage = "kubeconfig file of the throwaway cluster (default KUBECONFIG or ~/.kube/config; environments' cluster.kubeConfig is ignored)"
	cmd.Flags().Lookup("context").Usage = "context of the throwaway cluster (default the current context; environments' cluster.kubeContext is ignored)"
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", pipeline.DefaultSmokeTimeout, "how long to wait for every object to become healthy")
	cmd.Flags().BoolVar(&opts.Keep, "keep", false, "keep the throwaway namespace (and, after a failure, everything in it)")
	cmd.Flags().StringVar(&opts.NamespacePrefix, "namespace-prefix", "opm-smoke", "start of each throwaway namespace's name")
	cmd.Flags().BoolVar(&opts.AllowRealCluster, "i-know-this-is-a-real-cluster", false, "run even on a context that is an environment's own kubeContext")
	return cmd
}
