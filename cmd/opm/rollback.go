package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newRollbackCmd() *cobra.Command {
	var (
		env     string
		group   string
		relSel  []string
		timeout time.Duration
		noWait  bool
		files   []string
		cluster clusterFlags
		opts    pipeline.RollbackOptions
		output  string
	)
	cmd := &cobra.Command{
		Use: "rollback RELEASE [DIR] --to CHANGE_ID | rollback [DIR] --group GROUP --to COMMIT",
		Example: `  opm rollback blog examples --env staging --to change-sha1-1a2b3c4d
  opm rollback examples --group production --to 3f2a9c1d   # a whole fleet, to a commit`,
		Short: "Return a release to an earlier change by applying the commit it was applied from",
		Long: `Return release RELEASE of the deployment directory DIR (default ".") in --env to the
change CHANGE_ID (see opm history): the directory is rendered as of the git commit
that change recorded, checked out into a temporary worktree, and applied as a new
change with every guard of apply (the existence check, Namespace and
PersistentVolumeClaim protection, --dry-run).

The render must reproduce the manifest digest the change recorded; when it does not
(the catalog, opm or a values file changed since) nothing is applied unless
--allow-different-digest. A change without a recorded commit, or a commit missing from
the local repository, is not found (exit 5). --to may also name a git commit (or any
revision): the newest change the release ran from it.

With --group (or an --env that names a group or a comma list), every release of
every environment of the fleet (or those named with --release) returns to the git
commit --to: each to the newest change it ran from that commit. Nothing is written
unless every one of them ran that commit before. The waves go back in reverse
order, the last wave first, each waited for until healthy (--timeout) before the
one before it; releases already at the commit are left alone. Rolling back is not a
promotion: promotion gates do not hold it back, and each change records that it
was a rollback.

A single release's rollback waits until the release is healthy (--timeout), as
apply does, and fails naming what its pods report; --no-wait exits once applied.`,
		Args: func(cmd *cobra.Command, args []string) error {
			check := cobra.RangeArgs(1, 2)
			if group != "" {
				check = cobra.MaximumNArgs(1) // [DIR]; releases with --release
			}
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.To == "" && group != "" {
				return usageError{fmt.Errorf("--to is required: the git commit to return the group to (opm status --group %s shows which commit runs where)", group)}
			}
			if opts.To == "" {
				return usageError{fmt.Errorf("--to is required: the change ID to return to (opm history %s lists them)", args[0])}
			}
			if opts.MaxHistory < 1 {
				return usageError{fmt.Errorf("--max-history must be at least 1, not %d", opts.MaxHistory)}
			}
			if group != "" {
				opts.Selection = (&selectionFlags{group: group, releases: relSel, files: files}).selection(args)
			} else {
				opts.Selection = (&selectionFlags{env: env, releases: args[:1], files: files}).selection(args[1:])
			}
			opts.ClusterOptions = cluster.options()
			opts.Progress = progressPrinter(cmd, output)
			opts.ReleaseDone = summaryPrinter(cmd, output)
			opts.RunURL, opts.Actor = ciRunURL(getenv(cmd)), pipeline.Actor(getenv(cmd))
			opts.Holder = lock.HolderFrom(getenv(cmd))
			envs, err := pipeline.Fleet(cmd.Context(), opts.Selection)
			if err != nil {
				return err
			}
			if len(envs) > 1 || (opts.Environment != "" && envs[0].Name != opts.Environment) {
				fleet, err := pipeline.RollbackFleet(cmd.Context(), opts, timeout)
				if fleet == nil {
					return err
				}
				if output == "json" {
					if encErr := writeJSON(cmd.OutOrStdout(), fleet); encErr != nil && err == nil {
						return encErr
					}
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), report.RolloutTable(fleet))
				return err
			}
			// A rollback during an incident goes red when what it returns
			// to is not healthy either, as apply does (a fleet waits per
			// wave above).
			opts.Wait, opts.WaitTimeout = !noWait, timeout
			opts.HealthWaiting = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }
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
				fmt.Fprintf(cmd.OutOrStdout(), "release %s %s from %s to %s (commit %s)\n", opts.Releases[0], verb, res.From, res.To, res.Commit)
				if res.RenderedDigest != res.RecordedDigest {
					fmt.Fprintf(cmd.ErrOrStderr(), "Warning: the commit rendered digest %s, not the recorded %s (--allow-different-digest)\n", res.RenderedDigest, res.RecordedDigest)
				}
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.To, "to", "", "change ID to return to (see opm history), or a git commit")
	fs.StringVarP(&env, "env", "e", "", "environment the release is deployed in (a group or a comma list rolls back a fleet)")
	fs.StringVar(&group, "group", "", "roll back every environment of this group to the commit --to, last wave first")
	fs.StringArrayVarP(&relSel, "release", "r", nil, "with --group, a release to roll back (repeatable; default all)")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "how long the release (each wave of a fleet, before the one before it goes back) may take to become healthy")
	fs.BoolVar(&noWait, "no-wait", false, "do not wait for the release to become healthy: exit once applied")
	fs.StringArrayVarP(&files, "values", "f", nil, "values file merged last, as for the original apply (repeatable)")
	cluster.register(fs)
	fs.BoolVar(&opts.AllowDifferentDigest, "allow-different-digest", false, "apply even when the commit no longer renders the recorded manifest digest")
	registerApplyGuards(fs, &opts.ApplyOptions)
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
