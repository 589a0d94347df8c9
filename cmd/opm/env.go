package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
)

// envKey holds how a run reads the CI facts it records (who applies, from
// which run, who holds the lock, the seal key): the process's environment,
// unless the run was given its own (withEnv), as tests that run commands
// side by side in one process do.
type envKey struct{}

// withEnv runs the commands of ctx with getenv as their environment.
func withEnv(ctx context.Context, getenv func(string) string) context.Context {
	return context.WithValue(ctx, envKey{}, getenv)
}

// envOf is the environment of ctx's run: os.Getenv unless withEnv set one.
func envOf(ctx context.Context) func(string) string {
	if f, ok := ctx.Value(envKey{}).(func(string) string); ok {
		return f
	}
	return os.Getenv
}

// getenv is envOf the command's context.
func getenv(cmd *cobra.Command) func(string) string { return envOf(cmd.Context()) }
