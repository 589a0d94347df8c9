package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
)

// colourModes are the values of --color.
var colourModes = []string{"auto", "always", "never"}

// colourFlag is the root's --color flag.
const colourFlag = "color"

// addColourFlag adds --color to root: auto (the default) colours text
// output on a terminal unless NO_COLOR is set (no-color.org) or TERM is
// dumb; always and never decide regardless.
func addColourFlag(root *cobra.Command) {
	root.PersistentFlags().String(colourFlag, "auto", "colour text output (diffs, health): auto (on a terminal, unless NO_COLOR is set), always or never")
}

// colourOn reports whether cmd's text output is coloured. Only text is:
// JSON, YAML and Markdown never carry escape codes.
func colourOn(cmd *cobra.Command) (bool, error) {
	mode := "auto"
	if f := cmd.Flags().Lookup(colourFlag); f != nil {
		mode = f.Value.String()
	}
	if !slices.Contains(colourModes, mode) {
		return false, usageError{fmt.Errorf("--color %q: use auto, always or never", mode)}
	}
	if f := cmd.Flags().Lookup("output"); f != nil {
		if o := f.Value.String(); o != "text" && o != "table" && o != "" {
			return false, nil
		}
	}
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	}
	if _, set := os.LookupEnv("NO_COLOR"); set || os.Getenv("TERM") == "dumb" {
		return false, nil
	}
	// The terminal is the process's stdout, under the redactor.
	return isTerminal(operatorOut(cmd)), nil
}
