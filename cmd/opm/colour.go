package main

import (
	"fmt"
	"os"
	"regexp"
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

const (
	colorReset  = "\x1b[0m"
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
)

// healthWords are the health states and verdicts status prints.
var healthWords = regexp.MustCompile(`\b(Current|InProgress|Terminating|Unknown|Failed|NotFound|not healthy|healthy)\b`)

// paintHealth colours the health words of a finished table: escape codes
// added after the columns were aligned leave the alignment as it was.
func paintHealth(text string, on bool) string {
	if !on {
		return text
	}
	return healthWords.ReplaceAllStringFunc(text, func(w string) string {
		c := colorYellow
		switch w {
		case "Current", "healthy":
			c = colorGreen
		case "Failed", "NotFound", "not healthy":
			c = colorRed
		}
		return c + w + colorReset
	})
}
