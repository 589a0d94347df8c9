package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/pipeline/scaffold"
)

func newInitCmd() *cobra.Command {
	var opts scaffold.DeploymentOptions
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Start a deployment directory: environments, a release and its module",
		Long: `Write a new deployment directory DIR (default "."): cue.mod/module.cue, deploy.cue with
two environments (staging, and production after it) and one release, and the module
it deploys in modules/NAME/NAME.cue (--module, default "hello"). It renders, reviews
and applies as written; docs/first-module.md explains every line. Nothing that
exists is overwritten.`,
		Example: `  opm init hello-deploy
  opm render hello-deploy --env staging
  opm apply hello-deploy --env staging
  opm init module worker hello-deploy`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = "."
			if len(args) > 0 {
				opts.Dir = args[0]
			}
			written, err := scaffold.Deployment(opts)
			if err != nil {
				return usageError{err}
			}
			for _, f := range written {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", f)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "next: opm render %q --env staging\n", opts.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Module, "module", "hello", "name of the first module and its release")
	cmd.Flags().StringVar(&opts.ModulePath, "module-path", "example.com/deploy", "CUE module path of the deployment directory (prefixes its modules' import paths)")
	cmd.AddCommand(newInitModuleCmd())
	return cmd
}

func newInitModuleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "module NAME [DIR]",
		Short: "Add a module to a deployment directory",
		Long: `Write modules/NAME/NAME.cue into the deployment directory DIR (default "."): a module
with a documented #config and one web component, and print the lines that deploy it.`,
		Example: `  opm init module worker hello-deploy`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) > 1 {
				dir = args[1]
			}
			written, howTo, err := scaffold.Module(dir, args[0])
			if err != nil {
				return usageError{err}
			}
			for _, f := range written {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", f)
			}
			fmt.Fprint(cmd.OutOrStdout(), howTo)
			return nil
		},
	}
}
