package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
)

func newExplainCmd() *cobra.Command {
	var (
		sel    selectionFlags
		output string
	)
	cmd := &cobra.Command{
		Use:     "explain [DIR]",
		Example: `  opm explain examples --env staging --release blog`,
		Short:   "Show every input a release's fingerprint covers, hash by hash",
		Long: `Print, per release in --env, its input fingerprint and every input it covers
(the renderer's build ID, the module file, each file of each package the release
reaches, embedded files, the environment's values files as evaluated, -f files)
with its SHA-256, or why the release has no fingerprint (it then always renders).
apply and diff skip a release when this fingerprint equals the "inputs" of its
inventory's newest change; review skips a pair when both sides give the same.
To check a skip, run the command with OPM_VERIFY_SKIPS=1: it renders anyway and
fails naming the release when the skip would have been wrong.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := pipeline.Explain(cmd.Context(), sel.selection(args))
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), ex)
			}
			w := cmd.OutOrStdout()
			for _, e := range ex {
				if e.Unsure != "" {
					fmt.Fprintf(w, "release %s (env %s): no fingerprint, always rendered: %s\n", e.Release, orDash(e.Environment), e.Unsure)
					continue
				}
				fmt.Fprintf(w, "release %s (env %s): %s\n", e.Release, orDash(e.Environment), e.Fingerprint)
				for _, in := range e.Inputs {
					fmt.Fprintf(w, "  %-16.16s  %-11s %s\n", in.Hash, in.Kind, in.Name)
				}
			}
			return nil
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
