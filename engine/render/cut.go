package render

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"

	"github.com/opmodel/pipeline/catalog"
	"github.com/opmodel/pipeline/engine/load"
)

// Whether a release's module can be cut into shares, read from the syntax
// of the root package and of the module (share.go shares them out), and
// the cut itself.

// modulePackage is the package release key's #module is, when the root
// package's files say so plainly enough that nothing else can reach into
// it: every declaration of the release (and every pattern over releases)
// is struct literals, the catalog's #ModuleRelease and & of them, and its
// #module is only ever written as one imported package (`#module: m`). A
// release whose #module could take a conjunct from anywhere else (an
// embedding, a comprehension, `m & {…}`, a top-level embedding of the root
// package) is not shared: a goroutine building that package alone would
// miss it.
func modulePackage(d *load.Deployment, key string) (*build.Instance, bool) {
	root := d.RootPackage()
	if root == nil {
		return nil, false
	}
	var path string
	ok := true
	var release func(e ast.Expr, mine bool)
	release = func(e ast.Expr, mine bool) {
		switch e := e.(type) {
		case *ast.ParenExpr:
			release(e.X, mine)
		case *ast.BinaryExpr:
			if e.Op.String() != "&" {
				ok = false
				return
			}
			release(e.X, mine)
			release(e.Y, mine)
		case *ast.SelectorExpr:
			// The catalog's #ModuleRelease, which only declares #module.
			if imp := importOf(e.X); labelName(e.Sel) != "#ModuleRelease" || (imp != catalog.ModulePath && imp != strings.TrimSuffix(catalog.ModulePath, "@v0")) {
				ok = false
			}
		case *ast.StructLit:
			for _, el := range e.Elts {
				switch el := el.(type) {
				case *ast.Field:
					// A computed label is a regular field, never #module.
					if labelName(el.Label) == "#module" {
						imp := importOf(el.Value)
						switch {
						case !mine || imp == "":
							ok = false
						case path == "":
							path = imp
						case path != imp:
							ok = false
						}
					}
				case *ast.EmbedDecl:
					release(el.Expr, mine)
				case *ast.LetClause, *ast.Ellipsis, *ast.Attribute, *ast.CommentGroup:
				default:
					ok = false // a comprehension may declare anything
				}
			}
		default:
			ok = false
		}
	}
	for _, f := range root.Files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.Field:
				if labelName(decl.Label) != "releases" {
					continue // nothing a release embeds may refer to it
				}
				st, isStruct := decl.Value.(*ast.StructLit)
				if !isStruct {
					return nil, false
				}
				for _, el := range st.Elts {
					field, isField := el.(*ast.Field)
					if !isField {
						return nil, false
					}
					if _, pattern := field.Label.(*ast.ListLit); pattern {
						release(field.Value, false)
					} else if name := labelName(field.Label); name == "" {
						return nil, false // a label computed: it may be key
					} else if name == key {
						release(field.Value, true)
					}
				}
			case *ast.EmbedDecl, *ast.Comprehension:
				return nil, false // it may declare releases
			}
		}
	}
	if !ok || path == "" {
		return nil, false
	}
	inst := root.LookupImport(path)
	return inst, inst != nil && inst.PkgName != ""
}

// importOf is the import path e names when it is an imported package's
// identifier, else "".
func importOf(e ast.Expr) string {
	id, ok := e.(*ast.Ident)
	if !ok {
		return ""
	}
	spec, ok := id.Node.(*ast.ImportSpec)
	if !ok || spec.Path == nil {
		return ""
	}
	p, err := strconv.Unquote(spec.Path.Value)
	if err != nil {
		return ""
	}
	return p
}

// cuttable reports whether the module's #components can be cut to a share
// of names without changing a component of the share: every #components
// the module's own files declare is a literal struct, and no expression
// of them names #components or a component (a component that reads
// another, or one that ranges over #components, would read what a cut
// removed). It is conservative: a field of a component that happens to
// share another component's name keeps the module whole.
func cuttable(files []*ast.File, names []string) bool {
	declared := false
	for _, f := range files {
		for _, decl := range f.Decls {
			if field, ok := decl.(*ast.Field); ok && labelName(field.Label) == "#components" {
				if _, ok := field.Value.(*ast.StructLit); !ok {
					return false
				}
				declared = true
			}
		}
	}
	if !declared {
		return false
	}
	referenced := false
	for _, f := range files {
		labels := map[*ast.Ident]bool{}
		ast.Walk(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if id, ok := n.Label.(*ast.Ident); ok {
					labels[id] = true
				}
			case *ast.Alias:
				labels[n.Ident] = true
			case *ast.SelectorExpr:
				if id, ok := n.Sel.(*ast.Ident); ok {
					labels[id] = true
				}
			case *ast.LetClause:
				labels[n.Ident] = true
			case *ast.ForClause:
				labels[n.Key], labels[n.Value] = true, true
			case *ast.ImportSpec:
				labels[n.Name] = true
			case *ast.Package:
				labels[n.Name] = true
			case *ast.Ident:
				if !labels[n] && (n.Name == "#components" || slices.Contains(names, n.Name)) {
					referenced = true
				}
			}
			return !referenced
		}, nil)
		if referenced {
			return false
		}
	}
	return true
}

// labelName is a field label's name when it is written as an identifier
// or a string, else "".
func labelName(l ast.Label) string {
	switch l := l.(type) {
	case *ast.Alias:
		if inner, ok := l.Expr.(ast.Label); ok {
			return labelName(inner)
		}
	case *ast.Ident:
		return l.Name
	case *ast.BasicLit:
		if s, err := strconv.Unquote(l.Value); err == nil {
			return s
		}
	}
	return ""
}

// cutter cuts a module's files (parsed again, its own to change) down to
// the components of share: each #components the files declare keeps only
// those fields (fields of any other shape kept), and one more file sets
// #config to the merged values (data, their JSON).
func cutter(pkgName string, share []string, data []byte) func([]*ast.File) ([]*ast.File, error) {
	return func(files []*ast.File) ([]*ast.File, error) {
		for _, f := range files {
			for _, decl := range f.Decls {
				field, ok := decl.(*ast.Field)
				if !ok || labelName(field.Label) != "#components" {
					continue
				}
				st, ok := field.Value.(*ast.StructLit)
				if !ok {
					return nil, errors.New("#components is not a literal struct")
				}
				st.Elts = slices.DeleteFunc(st.Elts, func(e ast.Decl) bool {
					c, ok := e.(*ast.Field)
					if !ok {
						return false
					}
					name := labelName(c.Label)
					return name != "" && !slices.Contains(share, name)
				})
			}
		}
		vf, err := parser.ParseFile(load.SyntheticFile, fmt.Sprintf("package %s\n#config: %s\n", pkgName, data))
		if err != nil {
			return nil, fmt.Errorf("writing the merged values as CUE: %w", err)
		}
		return append(files, vf), nil
	}
}
