package load

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"cuelang.org/go/cue/errors"
)

// embedArg finds an @embed attribute's file= or glob= argument.
var embedArg = regexp.MustCompile(`@embed\([^)]*\b(?:file|glob)=("[^"]*"|[^,)\s]+)`)

// streamedEmbeds explains CUE's "@embed: streaming not implemented": the
// embed reads YAML files holding several documents (what `helm template`
// writes), which CUE embeds only as text. It names each such file and the
// catalog component that takes them as they are.
func streamedEmbeds(err error) []string {
	var hints []string
	for _, e := range errors.Errors(err) {
		if !strings.Contains(e.Error(), "streaming not implemented") {
			continue
		}
		for _, p := range errors.Positions(e) {
			if p.Filename() == "" {
				continue
			}
			files := multiDocumentFiles(p.Filename(), p.Line())
			where := fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column())
			what := "a file with several YAML documents"
			if len(files) > 0 {
				what = strings.Join(files, ", ")
			}
			hints = append(hints, fmt.Sprintf("  the @embed at %s reads %s, which CUE embeds only as text.\n"+
				"  Embed the files with type=text and render them with core.#Manifests, which splits each file's documents and names the file in errors:\n"+
				"      #components: chart: {core.#Manifests, spec: manifests: _chart}\n"+
				"      _chart: _ @embed(glob=\"chart/templates/*.yaml\", type=text)\n"+
				"  (docs/migrating.md, \"From a Helm release\")", where, what))
			break
		}
	}
	return hints
}

// multiDocumentFiles reads the @embed argument on line of file and returns
// the files it matches that hold more than one YAML document, with counts.
func multiDocumentFiles(file string, line int) []string {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(src), "\n")
	if line < 1 || line > len(lines) {
		return nil
	}
	m := embedArg.FindStringSubmatch(lines[line-1])
	if m == nil {
		return nil
	}
	pattern := strings.Trim(m[1], `"`)
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(file), filepath.FromSlash(pattern)))
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range matches {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n := yamlDocuments(data); n > 1 {
			rel, _ := filepath.Rel(filepath.Dir(file), f)
			out = append(out, fmt.Sprintf("%s (%d documents)", filepath.ToSlash(rel), n))
		}
	}
	return out
}

// yamlDocuments counts the non-empty documents of a YAML stream: the
// parts between "---" lines that hold more than comments.
func yamlDocuments(data []byte) int {
	n, content := 0, false
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for s.Scan() {
		t := strings.TrimSpace(s.Text())
		if strings.HasPrefix(t, "---") {
			if content {
				n++
			}
			content = false
			continue
		}
		if t != "" && !strings.HasPrefix(t, "#") {
			content = true
		}
	}
	if content {
		n++
	}
	return n
}
