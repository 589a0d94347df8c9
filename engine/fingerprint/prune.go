package fingerprint

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"
	"github.com/opmodel/pipeline/engine/load"
)

// PrunedRoot returns the deployment directory's root package with the
// declarations of every release but keep blanked out, and the imports
// nothing else uses then: an overlay (file path → content) that makes
// cue/load read and the evaluator build only what keep's releases
// reach. Blanked bytes become spaces (line breaks stay), so every
// position CUE reports is the file's own. Nil when the syntax cannot show
// that the rest is independent of the releases removed (the scan's
// ErrUnsure cases), when a kept release is not declared by name, or when
// the root package is not the directory's only package: then everything
// is loaded, as without pruning. The evaluation of keep's releases is
// the same either way; only the cost differs.
//
// overlay (absolute path → content, as load.Options.Overlay) is read
// instead of the disk where it has a file, and the disk through the
// command's files (load.FilesOf), which the load that follows reads too.
func PrunedRoot(ctx context.Context, dir string, keep []string, overlay map[string][]byte) map[string][]byte {
	return pruneRoot(load.FilesOf(ctx), dir, keep, overlay, false)
}

// EnvironmentsRoot is PrunedRoot keeping no release: what evaluating the
// environments (and the fleet they declare) alone needs; nil when the
// syntax does not allow pruning.
func EnvironmentsRoot(ctx context.Context, dir string, overlay map[string][]byte) map[string][]byte {
	return pruneRoot(load.FilesOf(ctx), dir, nil, overlay, true)
}

// pruneRoot is PrunedRoot; with none, an empty keep blanks every release
// (what evaluating the environments alone needs).
func pruneRoot(host *load.Files, dir string, keep []string, overlay map[string][]byte, none bool) map[string][]byte {
	if len(keep) == 0 && !none {
		return nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.cue"))
	if err != nil {
		return nil
	}
	for name := range overlay {
		if filepath.Dir(name) == dir && strings.HasSuffix(name, ".cue") && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	srcs := map[string][]byte{}
	var files []*ast.File
	pkg := ""
	for _, name := range names {
		if filepath.Base(name)[0] == '.' || filepath.Base(name)[0] == '_' {
			return nil // cue/load's own rules for such files: leave it to it
		}
		b, ok := overlay[name]
		if !ok {
			if b, err = host.ReadFile(name); err != nil {
				return nil
			}
		}
		f, err := parser.ParseFile(name, b, parser.ParseComments)
		if err != nil {
			return nil
		}
		if pkg != "" && f.PackageName() != pkg || f.PackageName() == "" {
			return nil
		}
		pkg = f.PackageName()
		srcs[name], files = b, append(files, f)
	}
	t := &Tree{own: map[string][]*build.Instance{}}
	t.scanFiles(files, nil)
	if t.unsure != nil {
		return nil
	}
	for _, k := range keep {
		if _, ok := t.own[k]; !ok {
			return nil
		}
	}
	out := map[string][]byte{}
	for i, f := range files {
		name := names[i]
		b := slices.Clone(srcs[name])
		removed := map[ast.Node]bool{}
		for _, d := range f.Decls {
			top, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			if n, _, _ := ast.LabelName(top.Label); n != "releases" {
				continue
			}
			st := top.Value.(*ast.StructLit) // the scan was sure
			var drop []*ast.Field
			kept := 0
			for _, e := range st.Elts {
				rf, ok := e.(*ast.Field)
				if !ok {
					continue
				}
				if _, pattern := rf.Label.(*ast.ListLit); pattern {
					kept++
					continue
				}
				if n, _, _ := ast.LabelName(rf.Label); slices.Contains(keep, n) {
					kept++
					continue
				}
				drop = append(drop, rf)
			}
			if len(drop) == 0 {
				continue
			}
			if kept == 0 {
				blank(b, top.Pos().Offset(), top.End().Offset())
				removed[top] = true
				continue
			}
			if !st.Lbrace.IsValid() {
				return nil // `releases: a: …` with more than a: cannot happen, but be sure
			}
			for _, rf := range drop {
				end := rf.End().Offset()
				// A comma after the field goes with it.
				for j := end; j < len(b); j++ {
					if b[j] == ',' {
						end = j + 1
						break
					}
					if b[j] != ' ' && b[j] != '\t' {
						break
					}
				}
				blank(b, rf.Pos().Offset(), end)
				removed[rf] = true
			}
		}
		// Names the rest still uses; an import none of them names goes.
		used := map[string]bool{}
		ast.Walk(f, func(n ast.Node) bool {
			if removed[n] {
				return false
			}
			if _, ok := n.(*ast.ImportDecl); ok {
				return false
			}
			if id, ok := n.(*ast.Ident); ok {
				used[id.Name] = true
			}
			return true
		}, nil)
		for _, d := range f.Decls {
			decl, ok := d.(*ast.ImportDecl)
			if !ok {
				continue
			}
			var gone []*ast.ImportSpec
			for _, spec := range decl.Specs {
				path, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					return nil
				}
				name := ast.ParseImportPath(path).Qualifier
				if spec.Name != nil {
					name = spec.Name.Name
				}
				if !used[name] {
					gone = append(gone, spec)
				}
			}
			if len(gone) == len(decl.Specs) {
				blank(b, decl.Pos().Offset(), decl.End().Offset())
				continue
			}
			for _, spec := range gone {
				blank(b, spec.Pos().Offset(), spec.End().Offset())
			}
		}
		// What is left must still parse; anything odd: load everything.
		if _, err := parser.ParseFile(name, b); err != nil {
			return nil
		}
		out[name] = b
	}
	return out
}

// blank replaces b[from:to] with spaces, keeping line breaks.
func blank(b []byte, from, to int) {
	for i := from; i < to && i < len(b); i++ {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
}
