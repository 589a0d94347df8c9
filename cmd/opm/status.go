package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// targetFlags select deployed releases: [DIR] --env --release, or
// --name/--release-id with --namespace.
type targetFlags struct {
	sel                        selectionFlags
	name, releaseID, namespace string
}

func (t *targetFlags) register(fs *pflag.FlagSet) {
	t.sel.register(fs)
	fs.StringVar(&t.name, "name", "", "release name (instead of a deployment directory; needs --namespace)")
	fs.StringVar(&t.releaseID, "release-id", "", "release id (instead of a deployment directory; needs --namespace)")
	fs.StringVarP(&t.namespace, "namespace", "n", "", "namespace of the release selected with --name or --release-id")
}

func (t *targetFlags) target(args []string) (pipeline.Target, error) {
	if (t.name != "" || t.releaseID != "") && len(args) > 0 {
		return pipeline.Target{}, usageError{fmt.Errorf("give either a deployment directory or --name/--release-id, not both")}
	}
	if t.namespace != "" && t.name == "" && t.releaseID == "" {
		return pipeline.Target{}, usageError{fmt.Errorf("--namespace needs --name or --release-id (either or both)")}
	}
	return pipeline.Target{Selection: t.sel.selection(args), Name: t.name, ReleaseID: t.releaseID, Namespace: t.namespace}, nil
}

func newStatusCmd() *cobra.Command {
	var (
		tf      targetFlags
		cluster clusterFlags
		opts    pipeline.StatusOptions
		output  string
	)
	cmd := &cobra.Command{
		Use: "status [DIR] | --name NAME -n NS | --release-id ID -n NS",
		Example: `  opm status examples --env staging
  opm status examples --env staging --wait --timeout 2m
  opm status examples --env staging,production -o markdown   # the fleet board`,
		Short: "Show the health of a release's objects",
		Long: `Show each release's identity (name, namespace, environment, release id, module id,
current change id, last transition) and the health of its objects by component:
Current, InProgress, Failed, Missing or Terminating (kstatus). Objects come from the
release's inventory, or from a label scan when it has none; ghosts are listed apart.

With --wait, poll until every object is Current or one fails (--timeout, default 5m),
printing objects as they become ready. Exit 0 when healthy, 1 when not.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tf.target(args)
			if err != nil {
				return err
			}
			opts.Target, opts.ClusterOptions = t, cluster.options()
			if opts.Wait {
				opts.Progress = func(release string, h health.ObjectHealth) {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", release, h)
				}
			}
			res, err := pipeline.Status(cmd.Context(), opts)
			if res == nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				if err := writeJSON(out, res); err != nil {
					return err
				}
			case "yaml":
				y, err := yaml.Marshal(res)
				if err != nil {
					return err
				}
				out.Write(y)
			case "markdown":
				fmt.Fprint(out, report.FleetBoardMarkdown(res))
			default:
				on, cerr := colourOn(cmd)
				if cerr != nil {
					return cerr
				}
				redact.From(cmd.Context()).Value(res) // sealed before the columns are laid out
				fmt.Fprint(out, report.PaintHealth(report.StatusTable(res), on))
			}
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
			}
			if !res.Healthy || err != nil {
				return exitError{code: 1}
			}
			return nil
		},
	}
	tf.register(cmd.Flags())
	cluster.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, yaml or markdown (the fleet board: environment × release → commit, change, health, since, skipped gates)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until every object is Current or one fails")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return cmd
}
