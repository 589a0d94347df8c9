// Command opm renders, diffs, applies and prunes OPM releases. It is a thin
// front door: every command parses flags, calls one pipeline operation and
// prints its result.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/internal/gctune"
	"github.com/opmodel/pipeline/pipeline"
)

func main() {
	gctune.Apply()
	// client-go logs what it also returns (an unreachable server's
	// discovery failures) through klog, past the redactor: the errors opm
	// prints say it once, where and what.
	quiet := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(quiet)
	_ = quiet.Set("logtostderr", "false")
	_ = quiet.Set("stderrthreshold", "FATAL") // errors go to stderr otherwise
	klog.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI with args and returns the process exit code:
// 0 ok, 1 general, 2 validation, 3 connectivity, 4 permission, 5 not found,
// 6 conflict, 7 configuration.
//
// Everything the CLI prints passes through one redactor (engine/redact),
// which the engine tells what must not be published as it renders and
// reads inventories; only render's stdout, the operator's own manifests,
// bypasses it (see docs/secrets.md).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runWithInput is run with stdin as the standard input (-f -).
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	red := redact.New(pipeline.NewSealer(sealKey(envOf(ctx))))
	out, errOut := red.Writer(stdout), red.Writer(stderr)
	defer func() {
		// A panic is a bug, and its text may hold what the redactor hides:
		// it goes through the redactor like every other line, without the
		// stack (whose argument words could show a short secret as a
		// number).
		if r := recover(); r != nil {
			fmt.Fprintf(errOut, "Error: opm failed on an internal error (a bug; please report it with the command you ran): %v\n", r)
			code = fault.General.ExitCode()
		}
		_ = out.Flush()
		_ = errOut.Flush()
	}()
	ctx = redact.With(ctx, red)
	ctx = pipeline.WithSession(ctx) // each file read once, one connection and discovery per cluster for the command
	ctx = context.WithValue(ctx, operatorOutKey{}, stdout)
	return execute(ctx, args, stdin, out, errOut)
}

// operatorOutKey holds the unredacted stdout, for render alone.
type operatorOutKey struct{}

// operatorOut is where render writes manifests: stdout as it is, because
// `opm render | kubectl apply -f -` needs the Secret values it renders.
func operatorOut(cmd *cobra.Command) io.Writer {
	if w, ok := cmd.Context().Value(operatorOutKey{}).(io.Writer); ok {
		return w
	}
	return cmd.OutOrStdout()
}

func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ec exitError
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", ec.err)
		}
		return ec.code
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	if isUsage(err) {
		return fault.Validation.ExitCode()
	}
	return fault.KindOf(err).ExitCode()
}

// exitError ends a command with a given code: diff --exit-code and status
// use it for "differences" and "not healthy" (no message), and to keep
// errors at 2 or more where 1 already means "differences".
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit code %d", e.code)
}

func (e exitError) Unwrap() error { return e.err }

// usageError marks flag and argument mistakes, which are validation errors.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	info := buildinfo.Read()
	root := &cobra.Command{
		Use:           "opm",
		Short:         "Render, diff, apply and prune Open Platform Model releases",
		SilenceUsage:  true,
		SilenceErrors: true,
		// opm --version, as most CLIs answer it: one line (opm version
		// prints every field).
		Version: info.Version,
	}
	root.SetVersionTemplate(info.String() + "\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	addColourFlag(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkOutputFlag(cmd); err != nil {
			return err
		}
		return readStdin(cmd)
	}
	root.AddCommand(newRenderCmd(), newDiffCmd(), newApplyCmd(), newPruneCmd(), newStatusCmd(), newDeleteCmd(), newReviewCmd(), newHistoryCmd(), newRollbackCmd(), newVersionCmd())
	root.AddCommand(newSmokeCmd(), newUnlockCmd(), newInventoryCmd(), newRBACCmd(), newPlanCmd(), newGatesCmd(), newExplainCmd(), newInitCmd())
	// Added now, not when Execute would: the docs check and the CLI
	// reference see it like every other command.
	root.InitDefaultCompletionCmd()
	root.InitDefaultVersionFlag()
	registerCompletions(root)
	return root
}
