package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// clusterFlags are the flags of every command that talks to a cluster:
// --kubeconfig and --context. Each release's environment may name its own
// kubeContext/kubeConfig; these flags win over it.
type clusterFlags struct {
	kubeconfig string
	context    string
}

func (c *clusterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the environment's cluster.kubeConfig, else KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context (default: the environment's cluster.kubeContext, else the current context)")
}

func (c *clusterFlags) options() pipeline.ClusterOptions {
	return pipeline.ClusterOptions{Kubeconfig: c.kubeconfig, Context: c.context}
}

func newApplyCmd() *cobra.Command {
	var (
		sel     selectionFlags
		cluster clusterFlags
		lf      lockFlags
		opts    pipeline.ApplyOptions
		ro      pipeline.RolloutOptions
		wave    int
		output  string
	)
	cmd := &cobra.Command{
		Use: "apply [DIR]",
		Example: `  opm apply examples --env staging            # apply, prune, record, wait until healthy
  opm apply examples --env staging --dry-run
  opm apply examples --group production --gate-timeout 30m   # a fleet, wave by wave`,
		Short: "Apply releases to their clusters and prune what they no longer render",
		Long: `Render the releases of a deployment directory (default ".") and apply each to its
cluster with server-side apply (field manager "opm"): CRDs and Namespaces first,
then, once the CRDs are Established, the rest in weight order. Objects that would
not change are not written. Then the stale set — objects the release's inventory
Secret records but the render no longer produces — is pruned, and the inventory
is written. If anything fails to apply, nothing is pruned and the inventory is
not written.

Objects the release has not recorded yet (all of them on its first apply) must not
exist without the release's labels (use --adopt to take them over) nor be being
deleted; otherwise nothing is applied. Stale Namespaces, PersistentVolumeClaims and
CustomResourceDefinitions are kept unless --prune-namespaces / --prune-pvcs /
--prune-crds, and so is any object annotated helm.sh/resource-policy=keep (or
opmodel.dev/resource-policy=keep); kept objects stay in the inventory. An empty
render of a release that has objects is refused unless --force.

Prints one line per object as it is applied or pruned, then a summary per release.
Then it waits until every applied release is healthy (its objects Current by kstatus),
as timoni apply does, for at most --timeout (5m): a job that applied an image that
never pulls fails here, naming what the pods report (ImagePullBackOff). --no-wait
exits once applied.

When a release's input fingerprint (every file its render reads, its values files and
opm's version) equals the one its inventory recorded with the current change, and every
object it records is still as that apply left it, nothing is rendered: the release is
"unchanged (inputs identical)". --no-skip always renders.

--env may name a group of environments, or list several (--env a,b; --group G):
the fleet is applied wave by wave (rollout.wave), the environments of a wave in
parallel (--parallel-environments), and each wave must be healthy (--timeout)
before the next starts. The first environment that fails, stays unhealthy or is
refused by a promotion gate stops every later wave; a table says what happened
to each environment. An environment whose rollout.after names others is applied
only with a git commit they run, healthy (its gate), whether it is applied alone
or in a fleet; --skip-gates overrides and is recorded in the change. With --smoke,
each environment of a healthy wave is also smoke-tested (see opm smoke) in throwaway
namespaces of its own cluster before the next wave starts; a failed test stops the
rollout like an unhealthy environment.

Exit codes: 0 ok, 1 general, 2 validation, 3 connectivity, 4 permission, 5 not found,
6 conflict (another run held the release's lock for all of --lock-timeout), 7 configuration (a
decryption key or secret input is missing or wrong), 8 gate (a promotion gate refused).`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.MaxHistory < 1 {
				return usageError{fmt.Errorf("--max-history must be at least 1, not %d", opts.MaxHistory)}
			}
			opts.Selection = sel.selection(args)
			opts.ClusterOptions = cluster.options()
			var err error
			if opts.Locking, err = lf.locking(cmd); err != nil {
				return err
			}
			opts.Progress = progressPrinter(cmd, output)
			opts.ReleaseDone = summaryPrinter(cmd, output)
			opts.RunURL, opts.Actor = ciRunURL(getenv(cmd)), pipeline.Actor(getenv(cmd))
			// Waits are narrated on stderr: minutes of silence read as a hang.
			opts.GateWaiting = func(refusal error) { fmt.Fprintln(cmd.ErrOrStderr(), refusal) }
			opts.HealthWaiting = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }
			if opts.SkipGates {
				opts.SkippedBy = whoSkipped(getenv(cmd))
			}
			if ro.Smoke && ro.NoWait {
				return usageError{fmt.Errorf("--smoke needs each wave to become healthy first: drop --no-wait")}
			}
			ro.ApplyOptions = opts
			if cmd.Flags().Changed("wave") {
				ro.Wave = &wave
			}
			return runRollout(cmd, output, ro)
		},
	}
	sel.register(cmd.Flags())
	cluster.register(cmd.Flags())
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	registerApplyGuards(fs, &opts)
	fs.BoolVar(&opts.NoSkip, "no-skip", false, "render and apply even when the inputs are those of the recorded change and nothing on the cluster moved")
	fs.BoolVar(&opts.PruneGhosts, "prune-ghosts", false, "also prune ghosts: objects carrying this release's id that it neither records nor renders")
	fs.IntVar(&ro.ParallelEnvironments, "parallel-environments", 4, "environments of one wave applied at once")
	fs.IntVar(&wave, "wave", 0, "apply this wave of the selection only (one job of a CI matrix)")
	fs.DurationVar(&ro.Timeout, "timeout", 5*time.Minute, "how long the applied releases (each wave of a fleet) may take to become healthy")
	fs.BoolVar(&ro.NoWait, "no-wait", false, "do not wait for health: exit once applied (a fleet's waves follow each other at once)")
	fs.BoolVar(&ro.Smoke, "smoke", false, "after each wave of a fleet is healthy, smoke-test its environments in throwaway namespaces of their own clusters before the next wave")
	fs.BoolVar(&opts.SkipGates, "skip-gates", false, "apply without checking promotion gates (rollout.after); who skipped is recorded in the change")
	fs.DurationVar(&opts.GateTimeout, "gate-timeout", 0, "wait up to this long for the promotion gates to pass instead of refusing at once (0: refuse at once)")
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// registerApplyGuards adds the flags of every command that applies
// (apply, rollback): dry run, pruning and its protections, force, adoption
// and history.
func registerApplyGuards(fs *pflag.FlagSet, opts *pipeline.ApplyOptions) {
	fs.BoolVar(&opts.DryRun, "dry-run", false, "server-side dry run: report what would be applied, pruned and skipped; write nothing")
	fs.BoolVar(&opts.NoPrune, "no-prune", false, "do not delete stale objects (they stay in the inventory); the existence checks still run")
	fs.BoolVar(&opts.PruneNamespaces, "prune-namespaces", false, "allow pruning stale Namespaces, and everything in them")
	fs.BoolVar(&opts.PrunePVCs, "prune-pvcs", false, "allow pruning stale PersistentVolumeClaims, and their data")
	fs.BoolVar(&opts.PruneCRDs, "prune-crds", false, "allow pruning stale CustomResourceDefinitions, and every custom resource of their kinds")
	fs.BoolVar(&opts.Force, "force", false, "re-create objects whose immutable fields change; allow an empty render to prune everything")
	fs.BoolVar(&opts.Adopt, "adopt", false, "take over existing objects that lack this release's labels")
	fs.StringSliceVar(&opts.TakeOver, "take-over", pipeline.DefaultTakeOver(), "field managers whose fields apply takes over from objects they wrote (names, or prefixes ending in *)")
	fs.BoolVar(&opts.ForceConflicts, "force-conflicts", false, "take fields that other field managers own with other values (recorded in the change)")
	fs.IntVar(&opts.MaxHistory, "max-history", 10, "changes kept in the inventory Secret")
}

// progressPrinter prints one line per object as it happens: on stdout for
// text output, on stderr when stdout carries JSON.
func progressPrinter(cmd *cobra.Command, output string) func(pipeline.ProgressEvent) {
	w := cmd.OutOrStdout()
	if output == "json" {
		w = cmd.ErrOrStderr()
	}
	// On a terminal each object's line says how far the release is: an
	// apply of a few hundred objects takes seconds.
	counted := output != "json" && isTerminal(operatorOut(cmd))
	return func(e pipeline.ProgressEvent) { fmt.Fprintln(w, progressLine(e, counted)) }
}

// progressLine is an object's progress line, led by "[N/M]" when counted
// and the event carries a count.
func progressLine(e pipeline.ProgressEvent, counted bool) string {
	if !counted || e.Total == 0 {
		return e.Line()
	}
	width := len(fmt.Sprint(e.Total))
	return fmt.Sprintf("[%*d/%d] %s", width, e.Done, e.Total, e.Line())
}

// summaryPrinter prints a release's summary line and warnings right after
// its object lines, in text output; JSON output prints everything at the end.
func summaryPrinter(cmd *cobra.Command, output string) func(pipeline.AppliedRelease) {
	if output == "json" {
		return nil
	}
	return func(r pipeline.AppliedRelease) {
		fmt.Fprintln(cmd.OutOrStdout(), report.AppliedLine(r))
		printWarnings(cmd.ErrOrStderr(), r)
	}
}

// printApplyResult prints the JSON result (text was printed as it went)
// and passes the error on for main to map to an exit code.
func printApplyResult(cmd *cobra.Command, output string, res *pipeline.ApplyResult, err error) error {
	if res == nil || output != "json" {
		return err
	}
	if encErr := writeJSON(cmd.OutOrStdout(), res); encErr != nil && err == nil {
		return encErr
	}
	for _, r := range res.Releases {
		printWarnings(cmd.ErrOrStderr(), r)
	}
	return err
}

// runRollout applies the selection as pipeline.Deploy routes it: one
// environment as apply always did (its gates checked first, then waited
// for), a fleet wave by wave with a table at the end.
func runRollout(cmd *cobra.Command, output string, ro pipeline.RolloutOptions) error {
	res, err := pipeline.Deploy(cmd.Context(), ro)
	switch {
	case res == nil:
		return err
	case res.Apply != nil:
		return printApplyResult(cmd, output, res.Apply, err)
	}
	if output == "json" {
		if encErr := writeJSON(cmd.OutOrStdout(), res.Rollout); encErr != nil && err == nil {
			return encErr
		}
		return err
	}
	fmt.Fprint(cmd.OutOrStdout(), report.RolloutTable(res.Rollout))
	return err
}

// whoSkipped names the person (or CI actor) who skipped the gates.
func whoSkipped(getenv func(string) string) string {
	for _, k := range []string{"GITHUB_ACTOR", "USER", "LOGNAME"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return "unknown"
}

func printWarnings(w io.Writer, r pipeline.AppliedRelease) {
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", warn)
	}
}
