// Package mdcheck reads the project's Markdown the way GitHub renders it, so
// that `make test` can prove the documentation's links, anchors and `opm`
// command lines still point at things that exist.
//
// It knows only what the checks need: headings (and GitHub's anchor slugs for
// them), inline links outside code, and the command lines inside code spans
// and fenced blocks. It is not a Markdown renderer.
package mdcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Doc is one Markdown file, split into what the checks look at.
type Doc struct {
	Path     string
	Anchors  map[string]bool
	Links    []Link
	Commands []Command
}

// Link is an inline link [text](target) outside code.
type Link struct {
	Line   int
	Target string
}

// Command is one `opm …` invocation found in code: the words after "opm", up
// to the end of the shell command (a pipe into another program, &&, ;, or a
// comment).
type Command struct {
	Line  int
	Words []string
}

var (
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRE    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	spanRE    = regexp.MustCompile("`[^`]+`")
	// opm as a command word: at the start, after white space, a backtick,
	// a slash (go run ./cmd/opm) or "$ ".
	opmRE = regexp.MustCompile(`(?:^|[\s` + "`" + `/(])opm\s+(.*)$`)
)

// Parse reads the Markdown file at path.
func Parse(path string) (*Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return ParseText(path, string(b)), nil
}

// ParseText splits Markdown text; path is only recorded.
func ParseText(path, text string) *Doc {
	d := &Doc{Path: path, Anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			marker := trimmed[:3]
			switch {
			case !inFence:
				inFence, fence = true, marker
			case marker == fence:
				inFence = false
			}
			continue
		}
		if inFence {
			d.addCommand(n, line)
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			slug := Slug(m[2])
			if k := seen[slug]; k > 0 {
				d.Anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				d.Anchors[slug] = true
			}
			seen[slug]++
		}
		for _, span := range spanRE.FindAllString(line, -1) {
			d.addCommand(n, strings.Trim(span, "`"))
		}
		prose := spanRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			d.Links = append(d.Links, Link{Line: n, Target: m[1]})
		}
		// Explicit anchors: <a id="x"></a> or <a name="x">.
		for _, m := range anchorTagRE.FindAllStringSubmatch(prose, -1) {
			d.Anchors[m[1]] = true
		}
	}
	return d
}

var (
	anchorTagRE = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// A link inside a heading contributes its text only.
	headingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

func (d *Doc) addCommand(line int, code string) {
	m := opmRE.FindStringSubmatch(code)
	if m == nil {
		return
	}
	var words []string
	fields := strings.Fields(m[1])
	for i, w := range fields {
		if w == "&&" || w == ";" || w == "||" || strings.HasPrefix(w, "#") {
			break
		}
		// A pipe ends the command unless a flag alternative follows it, as
		// in a synopsis: `opm status … | --name N -n NS`.
		if w == "|" && (i+1 >= len(fields) || !strings.HasPrefix(fields[i+1], "-")) {
			break
		}
		words = append(words, w)
	}
	d.Commands = append(d.Commands, Command{Line: line, Words: words})
}

// Slug is GitHub's anchor for a heading: lower case, markup and punctuation
// dropped (hyphens and underscores kept), spaces turned into hyphens.
func Slug(heading string) string {
	h := headingLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckLinks reports every relative link of d whose file or #anchor does not
// resolve. parse reads another document (for anchors in other files).
func CheckLinks(d *Doc, parse func(string) (*Doc, error)) []string {
	var problems []string
	for _, l := range d.Links {
		t := l.Target
		if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(t, "#")
		target := d
		if file != "" {
			p := filepath.Join(filepath.Dir(d.Path), file)
			info, err := os.Stat(p)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: no file %s", d.Path, l.Line, t, p))
				continue
			}
			if anchor == "" || info.IsDir() {
				continue
			}
			if !strings.HasSuffix(p, ".md") {
				continue
			}
			if target, err = parse(p); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", d.Path, l.Line, t, err))
				continue
			}
		}
		if anchor != "" && !target.Anchors[anchor] {
			problems = append(problems, fmt.Sprintf("%s:%d: link %q: no heading with anchor #%s in %s", d.Path, l.Line, t, anchor, target.Path))
		}
	}
	return problems
}

// Files lists the Markdown a reader of the repository meets: the top-level
// *.md files and everything under docs/, relative to root.
func Files(root string) ([]string, error) {
	top, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		return nil, err
	}
	var docs []string
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, e os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			return err
		}
		if !e.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing docs/: %w", err)
	}
	return append(top, docs...), nil
}
