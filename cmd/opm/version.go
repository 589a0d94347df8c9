package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opmodel/pipeline/buildinfo"
)

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use: "version",
		Example: `  opm version
  opm version -o json`,
		Short: "Print opm's version, commit, build date, Go and CUE versions and embedded catalog",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := buildinfo.Read()
			switch output {
			case "json":
				return writeJSON(cmd.OutOrStdout(), info)
			default: // text; the root checks -o against the flag's formats
				fmt.Fprint(cmd.OutOrStdout(), info.Text())
				return nil
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
