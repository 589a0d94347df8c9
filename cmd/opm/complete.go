package main

import (
	"os"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opmodel/pipeline/pipeline"
)

// registerCompletions gives every command's value flags shell completion
// (cobra's bash, zsh, fish and powershell scripts: opm completion SHELL):
// --env and --group from the deployment directory (the command's DIR
// argument, else "."), --release likewise, -o from the formats the flag's
// own help lists, --context from the kubeconfig.
func registerCompletions(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		registerCompletions(c)
	}
	declared := func(c *cobra.Command, args []string) *pipeline.Declared {
		// DIR is the last argument that is a directory (opm history
		// RELEASE DIR puts it second), else the working directory.
		dir := "."
		for _, a := range slices.Backward(args) {
			if st, err := os.Stat(a); err == nil && st.IsDir() {
				dir = a
				break
			}
		}
		d, err := pipeline.DeclaredNames(c.Context(), dir)
		if err != nil {
			return &pipeline.Declared{}
		}
		return d
	}
	complete := func(name string, f func(c *cobra.Command, args []string) []string) {
		if cmd.Flags().Lookup(name) == nil {
			return
		}
		_ = cmd.RegisterFlagCompletionFunc(name, func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			return f(c, args), cobra.ShellCompDirectiveNoFileComp
		})
	}
	complete("env", func(c *cobra.Command, args []string) []string {
		d := declared(c, args)
		return append(d.Environments, d.Groups...) // --env takes a group too
	})
	complete("group", func(c *cobra.Command, args []string) []string { return declared(c, args).Groups })
	complete("release", func(c *cobra.Command, args []string) []string { return declared(c, args).Releases })
	complete("output", func(c *cobra.Command, _ []string) []string { return formatsOf(c.Flags().Lookup("output").Usage) })
	complete("context", func(c *cobra.Command, _ []string) []string {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if f := c.Flags().Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
			rules.ExplicitPath = f.Value.String()
		}
		cfg, err := rules.Load()
		if err != nil {
			return nil
		}
		var names []string
		for n := range cfg.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		return names
	})
}
