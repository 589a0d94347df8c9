package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newRenderCmd() *cobra.Command {
	var sel selectionFlags
	var output string
	cmd := &cobra.Command{
		Use: "render [DIR]",
		Example: `  opm render examples --env staging
  opm render examples --env staging --release blog -o json
  opm render examples --env production --release blog -f overrides.yaml`,
		Short: "Render releases to Kubernetes manifests",
		Long: `Render the releases of a deployment directory (default ".") to Kubernetes
manifests in apply order. -o yaml (default) prints a multi-document stream on
stdout and one summary line per release on stderr; -o json prints one object
with every release, its identity, digest, change ID, values and resources.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := pipeline.Render(cmd.Context(), pipeline.RenderOptions{Selection: sel.selection(args)})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(operatorOut(cmd), res)
			}
			y, err := res.YAML()
			if err != nil {
				return err
			}
			if _, err := operatorOut(cmd).Write(y); err != nil {
				return err
			}
			for _, r := range res.Releases {
				fmt.Fprintln(cmd.ErrOrStderr(), report.RenderedLine(r))
				for _, w := range r.Warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "  warning: "+w)
				}
			}
			return nil
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}
