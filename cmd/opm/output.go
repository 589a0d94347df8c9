package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Each command's -o formats are written once, in its flag's help ("output
// format: text, json or markdown"): completion offers them and the root
// checks them (checkOutputFlag) from there.

// formatWord is one format a flag's help names ("output format: text, json
// or markdown").
var formatWord = regexp.MustCompile(`\b[a-z]+\b`)

// formatsOf lists the formats in an -o flag's help, so completion never
// disagrees with what the command accepts.
func formatsOf(usage string) []string {
	_, list, ok := strings.Cut(usage, "output format: ")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, ";")
	list, _, _ = strings.Cut(list, "(")
	var out []string
	for _, w := range formatWord.FindAllString(list, -1) {
		if w != "or" && w != "and" {
			out = append(out, w)
		}
	}
	return out
}

// checkOutputFlag refuses an -o value the command's flag does not name
// among its formats: one check for every command, reading the list
// completion offers, so the two never disagree.
func checkOutputFlag(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("output")
	if f == nil {
		return nil
	}
	formats := formatsOf(f.Usage)
	if len(formats) == 0 || slices.Contains(formats, f.Value.String()) {
		return nil
	}
	list := strings.Join(formats[:len(formats)-1], ", ") + " or " + formats[len(formats)-1]
	return usageError{fmt.Errorf("-o must be %s, not %q", list, f.Value.String())}
}
