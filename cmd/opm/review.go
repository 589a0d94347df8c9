package main

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func newReviewCmd() *cobra.Command {
	var (
		opts     pipeline.ReviewOptions
		envs     []string
		base     string
		output   string
		shard    string
		planFile string
		wantCode bool
	)
	cmd := &cobra.Command{
		Use: "review [DIR] --base REF",
		Example: `  opm review examples --base main
  opm review examples --base main -o markdown   # the pull-request comment`,
		Short: "Compare the deployment directory with its version at a git ref, without a cluster",
		Long: `Render every selected release × environment twice — at the merge base of REF and
HEAD (checked out into a temporary git worktree) and in the working tree — and
compare them: objects added, modified (with a diff) and unchanged, the stale set
apply would prune, digests and change IDs. This is the review the GitHub Action
posts on a pull request; -o markdown prints the same bytes as its job summary.

Only what a change can affect is rendered: a release × environment whose input
fingerprint (every file its render reads, its values files, opm's version) is the
same on both sides is listed as unchanged without being evaluated (--no-skip
renders it anyway).

Renders are kept in opm's content-addressed cache (OPM_CACHE_DIR, default the
user cache directory; "off" keeps none) keyed by their input fingerprint: a
release rendered before with the same inputs — the base side, once main was
reviewed or merged — is read, verified, instead of evaluated (--no-cache reads
and writes no cache of any kind). Releases holding secret data are never cached.
How many renders the cache answered is printed on stderr ("render cache: 4 of 8
renders read from the cache, 4 rendered"). A cache that untrusted runs can also
write needs OPM_CACHE_KEY (a secret): every entry is then authenticated with it,
and one written without it is a miss.

--shard I/N reviews the I-th of N parts of the pairs to render and prints a
partial review (JSON) instead; "opm review merge" combines the N partials into the
one review, as if it had run on one machine. Without --plan, the pairs are dealt
out one by one; with --plan (a file "opm review plan --shards N" printed), each
shard reviews what the plan's split assigns it, balanced by recorded render cost.

REF is a branch, tag or commit; origin/REF is tried when REF does not exist.
With --exit-code, the exit code is 0 for no differences, 1 for differences and 2
or more for errors, as diff.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if base == "" {
				return usageError{fmt.Errorf("--base is required: the branch or commit to compare with")}
			}
			flags := &selectionFlags{releases: opts.Releases, files: opts.ValuesFiles}
			if err := flags.readPipes(); err != nil {
				return err
			}
			opts.Selection = flags.selection(args)
			opts.Environments = envs
			opts.BaseRefs = pipeline.BaseRef(base)
			if shard != "" {
				sh, err := pipeline.ParseShard(shard)
				if err != nil {
					return usageError{err}
				}
				opts.Shard = sh
				if planFile != "" {
					split, err := pipeline.ReadSplit(planFile)
					if err != nil {
						return err
					}
					opts.Split = split
				}
				part, err := pipeline.ReviewShard(cmd.Context(), opts)
				if err != nil {
					return err
				}
				printCacheLine(cmd, opts, part.ChangeSet)
				return writeJSON(cmd.OutOrStdout(), part)
			}
			if planFile != "" {
				return usageError{fmt.Errorf("--plan splits a sharded review: give --shard I/N too")}
			}
			cs, err := pipeline.Review(cmd.Context(), opts)
			if err != nil {
				return err
			}
			printCacheLine(cmd, opts, cs)
			return finishReview(cmd, output, wantCode, cs)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&base, "base", "", "branch, tag or commit to compare with (its merge base with HEAD)")
	fs.StringArrayVarP(&envs, "env", "e", nil, "environment to review (repeatable; default every declared one)")
	fs.StringArrayVarP(&opts.Releases, "release", "r", nil, "release to select (repeatable; default all)")
	fs.StringArrayVarP(&opts.ValuesFiles, "values", "f", nil, "values file merged last on both sides; needs exactly one release (repeatable)")
	fs.StringVarP(&output, "output", "o", "text", "output format: text, json or markdown")
	fs.BoolVar(&wantCode, "exit-code", false, "exit 1 when there are differences (0 none, 2+ errors)")
	fs.BoolVar(&opts.PruneNamespaces, "prune-namespaces", false, "review as apply --prune-namespaces would prune")
	fs.BoolVar(&opts.PrunePVCs, "prune-pvcs", false, "review as apply --prune-pvcs would prune")
	fs.BoolVar(&opts.PruneCRDs, "prune-crds", false, "review as apply --prune-crds would prune")
	fs.BoolVar(&opts.NoSkip, "no-skip", false, "render every release on both sides, even those whose input fingerprints are equal")
	fs.BoolVar(&opts.NoCache, "no-cache", false, "read and write no cache of any kind (renders, environments, identities, transforms)")
	fs.StringVar(&shard, "shard", "", "review only part I of N (\"2/8\") and print it as a partial review for opm review merge")
	fs.StringVar(&planFile, "plan", "", "with --shard: review the part the split in this file (opm review plan --shards N -o json) assigns")
	cmd.AddCommand(newReviewMergeCmd(), newReviewPlanCmd())
	return cmd
}

// printCacheLine reports the render cache's hits on stderr, unless the
// review was told not to use it.
func printCacheLine(cmd *cobra.Command, opts pipeline.ReviewOptions, cs *pipeline.ChangeSet) {
	if line := report.RenderCacheLine(cs); line != "" && !opts.NoCache && !opts.NoSkip {
		fmt.Fprintln(cmd.ErrOrStderr(), line)
	}
}

// finishReview prints a review and picks the exit code.
func finishReview(cmd *cobra.Command, output string, wantCode bool, cs *pipeline.ChangeSet) error {
	if cs.HeadUncommitted {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning: the head is the working tree, which has uncommitted changes: they are part of this review (commit them, or git stash, to review the commit alone)")
	}
	if err := printChangeSet(cmd, output, cs); err != nil {
		return err
	}
	var failed []string
	for _, rc := range cs.Releases {
		if rc.Error != "" {
			failed = append(failed, rc.Name+"/"+cmp.Or(rc.Environment, "-"))
		}
	}
	if len(failed) > 0 {
		err := fmt.Errorf("%d of %d releases could not be reviewed (%s)", len(failed), len(cs.Releases), strings.Join(failed, ", "))
		if wantCode {
			return exitError{code: 2, err: err}
		}
		return fault.Wrap(fault.Validation, err)
	}
	if wantCode && cs.Counts.Changed() {
		return exitError{code: 1}
	}
	return nil
}

func newReviewMergeCmd() *cobra.Command {
	var (
		output   string
		wantCode bool
	)
	cmd := &cobra.Command{
		Use:     "merge PART...",
		Example: `  opm review merge part-1.json part-2.json`,
		Short:   "Combine the partial reviews of every shard into one review",
		Long: `Read the partial reviews "opm review --shard I/N" printed, one file per shard, and
print the review they are parts of, as "opm review" would have printed it on one
machine (the same bytes with -o json). Partials of different reviews (another base
or head commit, other options or another opm, another shard count), a shard given
twice or a shard missing are refused (exit 2), naming which.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("give the partial review of every shard")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := pipeline.MergeReviewFiles(args...)
			if err != nil {
				return err
			}
			return finishReview(cmd, output, wantCode, cs)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown")
	cmd.Flags().BoolVar(&wantCode, "exit-code", false, "exit 1 when there are differences (0 none, 2+ errors)")
	return cmd
}

func newReviewPlanCmd() *cobra.Command {
	var (
		opts   pipeline.ReviewOptions
		envs   []string
		base   string
		output string
		shards int
		target time.Duration
		most   int
	)
	cmd := &cobra.Command{
		Use:     "plan [DIR] --base REF",
		Example: `  opm review plan examples --base main -o json`,
		Short:   "Plan a review without rendering: pairs, cached renders, cost, and a split into shards",
		Long: `Plan the review "opm review" would run, without rendering anything: the
release × environment pairs to review, those unchanged (equal input fingerprints),
the renders they need, how many the render cache holds, and an estimate of the
rest from the costs the cache recorded (` + pipeline.DefaultRenderCost.String() + ` a render when unknown).

With --shards N, or --target D (as many shards as keep each under D of
rendering, at most --max-shards), the plan also splits the pairs into shards
balanced by that cost. Hand the plan (-o json) to every shard job and run each
as "opm review --shard I/N --plan FILE": every shard then reviews what the split
assigns it, whatever its own cache holds.`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if base == "" {
				return usageError{fmt.Errorf("--base is required: the branch or commit to compare with")}
			}
			if shards < 0 || most < 1 {
				return usageError{fmt.Errorf("--shards must be 1 or more (0 for no split) and --max-shards 1 or more")}
			}
			flags := &selectionFlags{releases: opts.Releases, files: opts.ValuesFiles}
			if err := flags.readPipes(); err != nil {
				return err
			}
			opts.Selection = flags.selection(args)
			opts.Environments = envs
			opts.BaseRefs = pipeline.BaseRef(base)
			p, err := pipeline.PlanReview(cmd.Context(), opts)
			if err != nil {
				return err
			}
			switch {
			case shards > 0:
				p.SplitInto(shards)
			case target > 0:
				p.SplitInto(p.Shards(target, most))
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			fmt.Fprint(cmd.OutOrStdout(), report.ReviewPlanText(p))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&base, "base", "", "branch, tag or commit to compare with (its merge base with HEAD)")
	fs.StringArrayVarP(&envs, "env", "e", nil, "environment to review (repeatable; default every declared one)")
	fs.StringArrayVarP(&opts.Releases, "release", "r", nil, "release to select (repeatable; default all)")
	fs.StringArrayVarP(&opts.ValuesFiles, "values", "f", nil, "values file merged last on both sides; needs exactly one release (repeatable)")
	fs.BoolVar(&opts.NoCache, "no-cache", false, "plan as if the render cache were empty")
	fs.IntVar(&shards, "shards", 0, "split the pairs into this many shards, balanced by estimated cost")
	fs.DurationVar(&target, "target", 0, "split into as many shards as keep each under this much rendering (with --max-shards)")
	fs.IntVar(&most, "max-shards", 16, "the most shards --target may ask for")
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json (the file --plan reads)")
	return cmd
}
