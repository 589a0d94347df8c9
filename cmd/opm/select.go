package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opmodel/pipeline/pipeline"
)

// selectionFlags are the flags every command that reads a deployment
// directory shares: [DIR] --env --release -f --values-format.
type selectionFlags struct {
	env      string
	group    string
	releases []string
	files    []string
	// format is --values-format, for -f -.
	format string
	// stdin holds what `-f -` read, once (readStdin).
	stdin []byte
	// inline holds every -f file, read once in order, when one of them is
	// a pipe (readPipes).
	inline []pipeline.InlineValues
}

// stdinFlag is the -f value that reads the values from standard input.
const stdinFlag = "-"

func (s *selectionFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&s.env, "env", "e", "", "environment to render the releases in (environments[NAME]); render, diff, status, apply, prune, delete and smoke also take a group or a comma list")
	fs.StringVar(&s.group, "group", "", "every environment of this group, in wave order (render, diff, status, apply, prune, delete, smoke)")
	fs.StringArrayVarP(&s.releases, "release", "r", nil, "release to select (repeatable; default all)")
	fs.VarP(&valuesFlag{sel: s}, "values", "f", "values file (CUE, JSON or YAML; SOPS-encrypted JSON or YAML is decrypted in memory) merged last; - reads standard input, merged after the files; needs exactly one release (repeatable)")
	fs.StringVar(&s.format, "values-format", "auto", "format of -f - (standard input): auto (JSON or YAML by content), yaml, json or cue")
}

// valuesFlag is -f: a repeatable path, as a string array flag is, that
// also leads from the flag set back to its selection, so the root reads
// -f - before the command runs (readStdin).
type valuesFlag struct{ sel *selectionFlags }

func (v *valuesFlag) Set(f string) error { v.sel.files = append(v.sel.files, f); return nil }
func (v *valuesFlag) Type() string       { return "stringArray" }
func (v *valuesFlag) String() string {
	if len(v.sel.files) == 0 {
		return "[]"
	}
	return "[" + strings.Join(v.sel.files, ",") + "]"
}

// readStdin reads standard input into the command's selection when one of
// its -f values is -, once, before the command runs.
func readStdin(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("values")
	if f == nil {
		return nil
	}
	v, ok := f.Value.(*valuesFlag)
	if !ok {
		return nil
	}
	if !slices.Contains(v.sel.files, stdinFlag) {
		return v.sel.readPipes()
	}
	s := v.sel
	if n := strings.Count(strings.Join(s.files, "\x00")+"\x00", stdinFlag+"\x00"); n > 1 {
		return usageError{fmt.Errorf("-f - is given %d times: standard input can be read once", n)}
	}
	switch s.format {
	case "auto", "yaml", "json", "cue":
	default:
		return usageError{fmt.Errorf("--values-format %q: use auto, yaml, json or cue", s.format)}
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return fmt.Errorf("reading the values of -f - from standard input: %w", err)
	}
	s.stdin = b
	return s.readPipes()
}

// readPipes reads every -f file into memory, once and in order, when one
// of them is a pipe (bash's -f <(sops -d x.yaml), a FIFO): a command
// reads its values files more than once (identities, objects, both sides
// of a review), and a pipe gives its content to the first read only.
func (s *selectionFlags) readPipes() error {
	if !slices.ContainsFunc(s.files, isPipe) {
		return nil
	}
	s.inline = nil
	for _, f := range s.files {
		if f == stdinFlag && s.stdin != nil {
			s.inline = append(s.inline, pipeline.InlineValues{Name: s.stdinName(), Data: s.stdin})
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading values file %q (-f/--values): %w", f, err)
		}
		s.inline = append(s.inline, pipeline.InlineValues{Name: f, Data: b})
	}
	return nil
}

// isPipe reports whether a -f value names something that is neither a
// regular file nor a directory (a pipe, /dev/fd/N).
func isPipe(f string) bool {
	if f == stdinFlag {
		return false
	}
	fi, err := os.Stat(f)
	return err == nil && !fi.Mode().IsRegular() && !fi.IsDir()
}

func (s *selectionFlags) stdinName() string {
	if s.format != "auto" && s.format != "" {
		return "stdin." + s.format
	}
	return "stdin"
}

func (s *selectionFlags) selection(args []string) pipeline.Selection {
	dir := "."
	if len(args) > 0 {
		dir = args[0]
	}
	sel := pipeline.Selection{Dir: dir, Environment: s.env, Group: s.group, Releases: s.releases, ValuesFiles: s.files}
	switch {
	case s.inline != nil:
		sel.ValuesFiles, sel.InlineValues = nil, s.inline
	case s.stdin != nil:
		sel.ValuesFiles = slices.DeleteFunc(slices.Clone(s.files), func(f string) bool { return f == stdinFlag })
		sel.InlineValues = []pipeline.InlineValues{{Name: s.stdinName(), Data: s.stdin}}
	}
	return sel
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
