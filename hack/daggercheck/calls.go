package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// A call is one `dagger call …` command found in a document.
type call struct {
	where string // file:line
	words []string
}

// checkCallsInRepo checks every `dagger call` of the top-level Markdown,
// docs/*.md and .github/workflows/*.yml against the module's real API.
func checkCallsInRepo(repo string, a *api) ([]string, error) {
	var calls []call
	top, err := filepath.Glob(filepath.Join(repo, "*.md"))
	if err != nil {
		return nil, err
	}
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, p := range append(top, docs...) {
		md, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(repo, p)
		calls = append(calls, markdownCalls(rel, string(md))...)
	}
	workflows, err := filepath.Glob(filepath.Join(repo, ".github", "workflows", "*.y*ml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(workflows)
	for _, w := range workflows {
		b, err := os.ReadFile(w)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(repo, w)
		c, err := workflowCalls(rel, b)
		if err != nil {
			return nil, err
		}
		calls = append(calls, c...)
	}
	var problems []string
	for _, c := range calls {
		if err := a.check(c.words); err != nil {
			problems = append(problems, fmt.Sprintf("%s: `%s`: %v", c.where, strings.Join(c.words, " "), err))
		}
	}
	return problems, nil
}

// markdownCalls finds dagger calls in fenced code blocks (whole lines, with
// backslash continuations) and in inline code spans elsewhere.
func markdownCalls(name, text string) []call {
	var out []call
	lines := strings.Split(text, "\n")
	fenced := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		where := fmt.Sprintf("%s:%d", name, i+1)
		if fenced {
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + lines[i]
			}
			out = append(out, commandCalls(where, line)...)
			continue
		}
		spans := strings.Split(line, "`")
		for j := 1; j < len(spans); j += 2 {
			out = append(out, commandCalls(where, spans[j])...)
		}
	}
	return out
}

// workflowCalls finds dagger calls in `run:` scripts and in
// dagger/dagger-for-github steps with verb: call.
func workflowCalls(name string, b []byte) ([]call, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []call
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			var uses, verb string
			var args *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				switch k.Value {
				case "run":
					if v.Kind == yaml.ScalarNode {
						out = append(out, scriptCalls(name, v)...)
					}
				case "uses":
					uses = v.Value
				case "with":
					for j := 0; j+1 < len(v.Content); j += 2 {
						switch v.Content[j].Value {
						case "verb":
							verb = v.Content[j+1].Value
						case "args":
							args = v.Content[j+1]
						}
					}
				}
			}
			if strings.HasPrefix(uses, "dagger/dagger-for-github") && (verb == "" || verb == "call") && args != nil {
				out = append(out, commandCalls(fmt.Sprintf("%s:%d", name, args.Line), "dagger call "+args.Value)...)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return out, nil
}

func scriptCalls(name string, v *yaml.Node) []call {
	var out []call
	lines := strings.Split(v.Value, "\n")
	// A block scalar starts on the line after its key.
	first := v.Line
	if v.Style == yaml.LiteralStyle || v.Style == yaml.FoldedStyle {
		first++
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		n := i
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + lines[i]
		}
		out = append(out, commandCalls(fmt.Sprintf("%s:%d", name, first+n), line)...)
	}
	return out
}

// commandCalls splits a shell line into words (quotes kept together, a
// pipe, redirect, `;`, `&&` or comment ends a command) and returns the
// `dagger [flags] call …` commands among them.
func commandCalls(where, line string) []call {
	var out []call
	for _, cmd := range shellCommands(line) {
		for i, w := range cmd {
			if w != "dagger" {
				continue
			}
			words, ok := daggerCall(cmd[i:])
			if ok {
				out = append(out, call{where: where, words: words})
			}
			break
		}
	}
	return out
}

// daggerCall returns the words after `call` when cmd is `dagger [global
// flags] call …` for this module (no -m, or -m naming this repository).
func daggerCall(cmd []string) ([]string, bool) {
	for i := 1; i < len(cmd); i++ {
		w := cmd[i]
		switch {
		case w == "call":
			return cmd[i+1:], true
		case w == "-m" || w == "--mod":
			if i+1 < len(cmd) && !strings.Contains(cmd[i+1], "opmodel/pipeline") && cmd[i+1] != "." {
				return nil, false // another module
			}
			i++
		case strings.HasPrefix(w, "--mod=") || strings.HasPrefix(w, "-m="):
			if v := w[strings.Index(w, "=")+1:]; !strings.Contains(v, "opmodel/pipeline") && v != "." {
				return nil, false
			}
		case w == "--progress" || w == "--workdir":
			i++
		case strings.HasPrefix(w, "-"):
		default:
			return nil, false // another dagger verb
		}
	}
	return nil, false
}

func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	end := func() {
		flush()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote = r
			inWord = true
		case r == ' ' || r == '\t':
			flush()
		case r == '|' || r == ';' || r == '&' || r == '>' || r == '<' || r == '(' || r == ')' || r == '`':
			end()
		case r == '#' && !inWord:
			end()
			return cmds
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	end()
	return cmds
}

// callFlags are `dagger call`'s own flags (value-taking ones map to true).
var callFlags = map[string]bool{
	"-o": true, "--output": true, "-m": true, "--mod": true, "--progress": true, "--workdir": true,
	"-j": false, "--json": false, "-q": false, "-s": false, "-v": false, "-vv": false, "-vvv": false,
	"-d": false, "--debug": false, "-i": false, "--interactive": false, "-E": false, "--no-exit": false,
}

// check walks `[constructor flags] function [flags] (member [flags])…`
// through the API: every function, field and flag must exist, required
// flags must be given, and a chain cannot go on past a scalar.
func (a *api) check(words []string) error {
	cur := a.types[a.module]
	ctor := cur.fields[""]
	var m *member
	given := map[string]bool{}
	need := func() error {
		if m == nil {
			return nil
		}
		var missing []string
		for _, ar := range m.args {
			if ar.required && !given[ar.name] {
				missing = append(missing, "--"+ar.name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return fmt.Errorf("%s needs %s", displayName(m), strings.Join(missing, ", "))
		}
		return nil
	}
	m = ctor
	if m == nil {
		m = &member{args: map[string]*arg{}}
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") {
			name, value, hasValue := strings.Cut(w, "=")
			if takesValue, ok := callFlags[name]; ok {
				if takesValue && !hasValue {
					i++
				}
				continue
			}
			flag := strings.TrimPrefix(name, "--")
			ar := m.args[flag]
			if ar == nil || !strings.HasPrefix(name, "--") {
				return fmt.Errorf("%s has no flag %s (it has %s)", displayName(m), name, m.flagNames())
			}
			given[flag] = true
			if !ar.boolean && !hasValue {
				if i+1 >= len(words) {
					return fmt.Errorf("flag %s needs a value", name)
				}
				i++
			}
			_ = value
			continue
		}
		if cur == nil {
			return fmt.Errorf("%q follows a value that has no fields", w)
		}
		if err := need(); err != nil {
			return err
		}
		next := cur.fields[w]
		if next == nil || w == "" {
			return fmt.Errorf("%s has no function or field %q (it has %s)", cur.name, w, cur.names())
		}
		m = next
		given = map[string]bool{}
		cur = a.types[next.result.object]
		if next.result.object == "" {
			cur = nil
		}
	}
	return need()
}

func displayName(m *member) string {
	if m.name == "" {
		return "the constructor"
	}
	return m.name
}
