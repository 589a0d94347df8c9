package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newDiffCmd() *cobra.Command {
	var (
		sel      selectionFlags
		cluster  clusterFlags
		opts     pipeline.DiffOptions
		output   string
		wantCode bool
	)
	cmd := &cobra.Command{
		Use: "diff [DIR]",
		Example: `  opm diff examples --env staging
  opm diff examples --env staging --exit-code   # 1 when the cluster differs`,
		Short: "Show what apply would change on the cluster",
		Long: `Compare the rendered releases with the cluster: each object is added, modified or
unchanged (a server-side dry-run apply compared with the live object), stale objects
are what apply would prune, and ghosts carry the release's labels but are in neither
the inventory nor the render. Secret values never appear: a changed value shows as
a masked marker with before/after hashes.

With --all-environments, every environment the deployment declares is diffed
against its own cluster, one after the other: a drift check. An environment whose
cluster cannot be reached is reported as unreachable and the others are still
compared.

With --exit-code, the exit code is 0 for no differences, 1 for differences and 2 or
more for errors, as kubectl diff.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.AllEnvironments && sel.env != "" {
				return usageError{fmt.Errorf("--all-environments and --env exclude each other")}
			}
			opts.Selection = sel.selection(args)
			opts.ClusterOptions = cluster.options()
			cs, err := pipeline.Diff(cmd.Context(), opts)
			if cs == nil {
				return err
			}
			if err := printChangeSet(cmd, output, cs); err != nil {
				return err
			}
			if err != nil && output == "text" {
				err = saidAbove(err, cs)
			}
			if err != nil {
				if wantCode && fault.KindOf(err) == fault.General {
					return exitError{code: 2, err: err} // 1 means "differences"
				}
				return err
			}
			if wantCode && cs.Counts.Changed() {
				return exitError{code: 1}
			}
			return nil
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown")
	cmd.Flags().BoolVar(&wantCode, "exit-code", false, "exit 1 when there are differences (0 none, 2+ errors)")
	cmd.Flags().BoolVar(&opts.PruneNamespaces, "prune-namespaces", false, "diff as apply --prune-namespaces would prune")
	cmd.Flags().BoolVar(&opts.PrunePVCs, "prune-pvcs", false, "diff as apply --prune-pvcs would prune")
	cmd.Flags().BoolVar(&opts.PruneCRDs, "prune-crds", false, "diff as apply --prune-crds would prune")
	cmd.Flags().BoolVar(&opts.NoGhosts, "no-ghosts", false, "skip the label scan that finds ghosts")
	cmd.Flags().BoolVar(&opts.NoSkip, "no-skip", false, "render every release, even one whose inputs are those of its recorded change with nothing on the cluster moved")
	cmd.Flags().BoolVar(&opts.AllEnvironments, "all-environments", false, "diff every declared environment against its cluster (a drift check)")
	return cmd
}

// sealKeyEnv names the key that seals the digests and change IDs of
// releases holding secret data in published outputs.
const sealKeyEnv = "OPM_SEAL_KEY"

// isTerminal reports whether w is a terminal, where colour is welcome.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printChangeSet writes a diff's or review's change set as json, markdown
// (the Action's comment, with this build's footer) or text. In every
// format, releases holding secret data show sealed digests and change IDs
// (the redactor every output passes through, see run).
func printChangeSet(cmd *cobra.Command, output string, cs *pipeline.ChangeSet) error {
	out := cmd.OutOrStdout()
	switch output {
	case "json":
		return writeJSON(out, cs)
	case "markdown":
		fmt.Fprint(out, report.Markdown(cs, report.ReportMarkdownOptions(buildinfo.Read().Footer())))
	default:
		on, err := colourOn(cmd)
		if err != nil {
			return err
		}
		fmt.Fprint(out, report.Text(cs, on))
	}
	return nil
}

// saidAbove shortens an error whose every part the text output already
// printed under its release: the error says how many, not each again.
func saidAbove(err error, cs *pipeline.ChangeSet) error {
	failed := 0
	for _, rc := range cs.Releases {
		if rc.Error != "" {
			if !strings.Contains(err.Error(), rc.Error) {
				return err
			}
			failed++
		}
	}
	if failed == 0 {
		return err
	}
	return fault.Wrap(fault.KindOf(err), fmt.Errorf("%d of %d releases could not be compared (each error is printed above)", failed, len(cs.Releases)))
}
