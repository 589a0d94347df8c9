// Command opm renders, diffs, applies and prunes OPM releases. It is a thin
// front door: every command parses flags, calls one pipeline operation and
// prints its result.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/gctune"
)

func main() {
	gctune.Apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI with args and returns the process exit code:
// 0 ok, 1 general, 2 validation, 3 connectivity, 4 permission, 5 not found,
// 6 conflict, 7 configuration.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
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
	root := &cobra.Command{
		Use:           "opm",
		Short:         "Render, diff, apply and prune Open Platform Model releases",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRenderCmd(), newDiffCmd(), newApplyCmd(), newPruneCmd(), newStatusCmd(), newDeleteCmd(), newReviewCmd(), newHistoryCmd(), newRollbackCmd(), newVersionCmd())
	root.AddCommand(newSmokeCmd(), newUnlockCmd(), newInventoryCmd(), newRBACCmd(), newPlanCmd(), newExplainCmd())
	return root
}
