package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline"
)

func newRollbackCmd() *cobra.Command {
	var (
		env     string
		files   []string
		cluster clusterFlags
		opts    pipeline.RollbackOptions
		output  string
	)
	cmd := &cobra.Command{
		Use:   "rollback RELEASE [DIR] --to CHANGE_ID",
		Short: "Return a release to an earlier change by applying the commit it was applied from",
		Long: `Return release RELEASE of the deployment directory DIR (default ".") in --env to the
change CHANGE_ID (see opm history): the directory is rendered as of the git commit
that change recorded, checked out into a temporary worktree, and applied as a new
change with every guard of apply (the existence check, Namespace and
PersistentVolumeClaim protection, --dry-run).

The render must reproduce the manifest digest the change recorded; when it does not
(the catalog, opm or a values file changed since) nothing is applied unless
--allow-different-digest. A change without a recorded commit, or a commit missing from
the local repository, is not found (exit 5).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.RangeArgs(1, 2)(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if opts.To == "" {
				return usageError{fmt.Errorf("--to is required: the change ID to return to (opm history %s lists them)", args[0])}
			}
			if opts.MaxHistory < 1 {
				return usageError{fmt.Errorf("--max-history must be at least 1, not %d", opts.MaxHistory)}
			}
			opts.Selection = (&selectionFlags{env: env, releases: args[:1], files: files}).selection(args[1:])
			opts.ClusterOptions = cluster.options()
			opts.Progress = progressPrinter(cmd, output)
			opts.ReleaseDone = summaryPrinter(cmd, output)
			opts.RunURL = ciRunURL(os.Getenv)
			res, err := pipeline.Rollback(cmd.Context(), opts)
			if res == nil {
				return err
			}
			if output == "json" {
				if encErr := writeJSON(cmd.OutOrStdout(), res); encErr != nil && err == nil {
					return encErr
				}
				for _, r := range res.Releases {
					printWarnings(cmd.ErrOrStderr(), r)
				}
				return err
			}
			if err == nil {
				verb := "rolled back"
				if opts.DryRun {
					verb = "would roll back (server dry run)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "release %s %s from %s to %s (commit %s)\n", args[0], verb, res.From, res.To, res.Commit)
				if res.RenderedDigest != res.RecordedDigest {
					fmt.Fprintf(cmd.ErrOrStderr(), "Warning: the commit rendered digest %s, not the recorded %s (--allow-different-digest)\n", res.RenderedDigest, res.RecordedDigest)
				}
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.To, "to", "", "change ID to return to (see opm history)")
	fs.StringVarP(&env, "env", "e", "", "environment the release is deployed in")
	fs.StringArrayVarP(&files, "values", "f", nil, "values file merged last, as for the original apply (repeatable)")
	cluster.register(fs)
	fs.BoolVar(&opts.AllowDifferentDigest, "allow-different-digest", false, "apply even when the commit no longer renders the recorded manifest digest")
	registerApplyGuards(fs, &opts.ApplyOptions)
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
