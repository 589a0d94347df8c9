package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/mdcheck"
)

// repoRoot is the module root, two levels above this package.
const repoRoot = "../.."

// TestCLIReference keeps docs/cli.md equal to what the cobra tree says. After
// changing a command or flag, regenerate it with `make docs`.
func TestCLIReference(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join(repoRoot, "docs", "cli.md"))
	assert.NilError(t, err)
	golden.Assert(t, cliReference(newRoot(io.Discard, io.Discard)), abs)
}

// TestDocsLinksAndCommands fails when a relative link or #anchor in the
// README, CONTRIBUTING.md or docs/ points nowhere, or when an `opm` command
// line in their code names a command or flag the CLI does not have.
func TestDocsLinksAndCommands(t *testing.T) {
	files, err := mdcheck.Files(repoRoot)
	assert.NilError(t, err)
	assert.Assert(t, len(files) > 0)
	root := newRoot(io.Discard, io.Discard)
	cache := map[string]*mdcheck.Doc{}
	parse := func(p string) (*mdcheck.Doc, error) {
		p = filepath.Clean(p)
		if d, ok := cache[p]; ok {
			return d, nil
		}
		d, err := mdcheck.Parse(p)
		if err == nil {
			cache[p] = d
		}
		return d, err
	}
	for _, f := range files {
		d, err := parse(f)
		assert.NilError(t, err)
		for _, p := range mdcheck.CheckLinks(d, parse) {
			t.Error(p)
		}
		for _, c := range d.Commands {
			for _, p := range checkCommand(root, c.Words) {
				t.Errorf("%s:%d: opm %s: %s", d.Path, c.Line, strings.Join(c.Words, " "), p)
			}
		}
	}
}

// TestCheckCommandCatchesUnknowns proves the command check is not vacuous.
func TestCheckCommandCatchesUnknowns(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	assert.Equal(t, len(checkCommand(root, strings.Fields("apply examples --env staging -f v.yaml --dry-run"))), 0)
	assert.Equal(t, len(checkCommand(root, strings.Fields("inventory repair [DIR] [--env E]"))), 0)
	assert.DeepEqual(t, checkCommand(root, strings.Fields("aply examples")), []string{`no command "aply"`})
	assert.DeepEqual(t, checkCommand(root, strings.Fields("render --bogus -Z")), []string{`render has no flag --bogus`, `render has no flag -Z`})
}

// checkCommand resolves words (what follows "opm") to a command and checks
// every flag they name.
func checkCommand(root *cobra.Command, words []string) []string {
	cmd := root
	i := 0
	for ; i < len(words); i++ {
		next := findSub(cmd, words[i])
		if next == nil {
			break
		}
		cmd = next
	}
	if cmd == root && i < len(words) && !strings.HasPrefix(words[i], "-") && !strings.HasPrefix(words[i], "[") {
		return []string{fmt.Sprintf("no command %q", words[i])}
	}
	var problems []string
	for _, w := range words[i:] {
		w = strings.Trim(w, "[](){}…,.`'\"")
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue
		}
		name, _, _ := strings.Cut(w, "=")
		var f *pflag.Flag
		if long, ok := strings.CutPrefix(name, "--"); ok {
			f = cmd.Flags().Lookup(long)
			if f == nil {
				f = cmd.InheritedFlags().Lookup(long)
			}
		} else if len(name) == 2 {
			f = cmd.Flags().ShorthandLookup(name[1:])
			if f == nil {
				f = cmd.InheritedFlags().ShorthandLookup(name[1:])
			}
		} else {
			continue // a negative number or some argument, not a flag
		}
		if f == nil {
			problems = append(problems, fmt.Sprintf("%s has no flag %s", strings.TrimPrefix(cmd.CommandPath(), root.Name()+" "), name))
		}
	}
	return problems
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// cliReference renders the whole command tree as Markdown.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# CLI reference\n\n")
	b.WriteString("<!-- Generated from the cobra command tree by `make docs`; `make test` fails when it is stale. Do not edit. -->\n\n")
	fmt.Fprintf(&b, "%s\n\n", root.Short)
	b.WriteString("## Exit codes\n\n| code | class |\n|---|---|\n| 0 | success |\n")
	for k := fault.Kind(1); k < 32; k++ {
		if k == fault.General || k.String() != fault.General.String() {
			fmt.Fprintf(&b, "| %d | %s |\n", k.ExitCode(), k)
		}
	}
	b.WriteString("\n`diff --exit-code` and `review --exit-code` exit 1 when there are differences; `status` exits 1 when a release is not healthy.\n\n")
	b.WriteString("## Commands\n\n")
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if !s.IsAvailableCommand() || s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			all = append(all, s)
			walk(s)
		}
	}
	walk(root)
	for _, c := range all {
		fmt.Fprintf(&b, "- [`%s`](#%s) — %s\n", c.CommandPath(), mdcheck.Slug(c.CommandPath()), c.Short)
	}
	for _, c := range all {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", c.CommandPath(), c.Short)
		if c.Long != "" {
			fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(c.Long))
		}
		fmt.Fprintf(&b, "```\n%s\n```\n", c.UseLine())
		if c.Example != "" {
			fmt.Fprintf(&b, "\nExamples:\n\n```sh\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
		}
		var flags []*pflag.Flag
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				flags = append(flags, f)
			}
		})
		if len(flags) == 0 {
			continue
		}
		sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
		b.WriteString("\n| flag | default | meaning |\n|---|---|---|\n")
		for _, f := range flags {
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			typ, usage := pflag.UnquoteUsage(f)
			if typ != "" {
				name += " " + typ
			}
			def := f.DefValue
			if def == "" || def == "[]" || def == "false" || def == "0" || def == "0s" {
				def = ""
			} else {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", name, def, strings.ReplaceAll(usage, "|", "\\|"))
		}
	}
	return b.String()
}

// Every command's help shows examples, basics first, and each example is
// a command line the CLI accepts (the same check as the docs').
func TestEveryCommandHasExamplesThatParse(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || c.Hidden || c.Name() == "help" || c.Name() == "completion" || (c.Parent() != nil && c.Parent().Name() == "completion") {
			return
		}
		if !assert.Check(t, strings.TrimSpace(c.Example) != "", "opm %s has no Examples in its help", c.CommandPath()) {
			return
		}
		first, _, _ := strings.Cut(strings.TrimSpace(c.Example), "\n")
		assert.Check(t, strings.HasPrefix(first, c.CommandPath()+" ") || first == c.CommandPath(), "%s: the first example %q runs another command", c.CommandPath(), first)
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			line, _, _ = strings.Cut(line, "|")
			words := strings.Fields(line)
			if !assert.Check(t, len(words) > 1 && words[0] == "opm", "%s: example %q does not start with opm", c.CommandPath(), line) {
				continue
			}
			for _, p := range checkCommand(root, words[1:]) {
				t.Errorf("%s: example %q: %s", c.CommandPath(), line, p)
			}
		}
	}
	walk(root)
}

// TestReadmeMapsEveryPackage fails when a package of engine/, pipeline/ or
// internal/ is missing from the README's map of the code: the map is how a
// newcomer finds where a change belongs.
func TestReadmeMapsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	assert.NilError(t, err)
	for _, parent := range []string{"engine", "pipeline", "internal"} {
		entries, err := os.ReadDir(filepath.Join(repoRoot, parent))
		assert.NilError(t, err)
		for _, e := range entries {
			if !e.IsDir() || e.Name() == "testdata" {
				continue
			}
			if goFiles, _ := filepath.Glob(filepath.Join(repoRoot, parent, e.Name(), "*.go")); len(goFiles) == 0 {
				continue
			}
			name := parent + "/" + e.Name()
			assert.Check(t, strings.Contains(string(readme), "`"+name+"`"), "README.md's map of the code does not name %s", name)
		}
	}
}
