package main

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opmodel/pipeline/pipeline"
)

// selectionFlags are the flags every command that reads a deployment
// directory shares: [DIR] --env --release -f.
type selectionFlags struct {
	env      string
	group    string
	releases []string
	files    []string
}

func (s *selectionFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&s.env, "env", "e", "", "environment to render the releases in (environments[NAME]); render, diff, status, apply, prune, delete and smoke also take a group or a comma list")
	fs.StringVar(&s.group, "group", "", "every environment of this group, in wave order (render, diff, status, apply, prune, delete, smoke)")
	fs.StringArrayVarP(&s.releases, "release", "r", nil, "release to select (repeatable; default all)")
	fs.StringArrayVarP(&s.files, "values", "f", nil, "values file (CUE, JSON or YAML; SOPS-encrypted JSON or YAML is decrypted in memory) merged last; needs exactly one release (repeatable)")
}

func (s *selectionFlags) selection(args []string) pipeline.Selection {
	dir := "."
	if len(args) > 0 {
		dir = args[0]
	}
	return pipeline.Selection{Dir: dir, Environment: s.env, Group: s.group, Releases: s.releases, ValuesFiles: s.files}
}

// dirArg accepts zero or one DIR argument.
var dirArg cobra.PositionalArgs = func(cmd *cobra.Command, args []string) error {
	if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}

// writeJSON prints v as indented JSON: every command's -o json.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
