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
	"cuelang.org/go/cue/token"

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
func modulePackage(root *build.Instance, key string) (*build.Instance, bool) {
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
	if structs, literal := componentStructs(files); !literal || len(structs) == 0 {
		return false
	}
	referenced := false
	for _, f := range files {
		labels := map[*ast.Ident]bool{}
		ast.Walk(f, func(n ast.Node) bool {
			markLabels(n, labels)
			if id, ok := n.(*ast.Ident); ok && !labels[id] && (id.Name == "#components" || slices.Contains(names, id.Name)) {
				referenced = true
			}
			return !referenced
		}, nil)
		if referenced {
			return false
		}
	}
	return true
}

// markLabels marks in labels the identifiers n names rather than refers
// with: a field's label, an alias, a selector's name, the names a let or
// for clause, an import or the package clause declare. A walk visits a
// node before its identifiers, so it can tell a reference by the mark.
func markLabels(n ast.Node, labels map[*ast.Ident]bool) {
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
	}
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
		if err := keepComponents(files, share); err != nil {
			return nil, err
		}
		vf, err := parser.ParseFile(load.SyntheticFile, fmt.Sprintf("package %s\n#config: %s\n", pkgName, data))
		if err != nil {
			return nil, fmt.Errorf("writing the merged values as CUE: %w", err)
		}
		return append(files, vf), nil
	}
}

// keepComponents cuts each #components the files declare down to the
// fields named in keep (fields of any other shape kept).
func keepComponents(files []*ast.File, keep []string) error {
	structs, literal := componentStructs(files)
	if !literal {
		return errors.New("#components is not a literal struct")
	}
	for _, st := range structs {
		st.Elts = slices.DeleteFunc(st.Elts, func(e ast.Decl) bool {
			c, ok := e.(*ast.Field)
			if !ok {
				return false
			}
			name := labelName(c.Label)
			return name != "" && !slices.Contains(keep, name)
		})
	}
	return nil
}

// A release rendered alone and shared out needs nothing of its module's
// components on the caller's goroutine: the shares build them. So the
// deployment is evaluated with the module's #components cut away
// (load.Options.Edit), which spares evaluating every component at its
// default values (a fifth of a render of 1 000 objects), and the
// components are named from the module's syntax. That needs more of the
// syntax than sharing does: the release is the only one the root
// declares or the one selected, every #components is a literal struct of
// plainly named fields, and nothing outside the module can read them —
// the root package names #components nowhere and the module's package
// only as a #module, and no other package imports it. Every other path
// — a share failing, a reference to place, a stand-in render not shared,
// any error at all — needs the components, and the release renders again
// from the deployment as written (errCut), so what it says is the whole
// render's.

// errCut says a render of a deployment whose module's components were cut
// away needed them: the deployment is loaded again as written.
var errCut = errors.New("the module's components were cut from this evaluation")

// moduleCut is the cut of one render's load: which release, and its
// components' names as the module's syntax writes them (sorted, as
// load.FieldNames lists them). done says the load made it.
type moduleCut struct {
	releases []string
	least    int
	key      string
	names    []string
	done     bool
}

// edit is load.Options.Edit for the cut: the release's module with no
// components, when the syntax allows it and the components are enough
// to share out.
func (c *moduleCut) edit(root *build.Instance) (string, func([]*ast.File) ([]*ast.File, error)) {
	key := ""
	switch len(c.releases) {
	case 0:
		keys, ok := releaseKeys(root)
		if !ok || len(keys) != 1 {
			return "", nil
		}
		key = keys[0]
	case 1:
		key = c.releases[0]
	default:
		return "", nil
	}
	module, ok := modulePackage(root, key)
	if !ok {
		return "", nil
	}
	names, ok := componentNames(module.Files)
	if !ok || len(names) < 2*c.least || !cuttable(module.Files, names) || !keepsOut(root, module) {
		return "", nil
	}
	c.key, c.names, c.done = key, names, true
	return module.ImportPath, func(files []*ast.File) ([]*ast.File, error) {
		return files, keepComponents(files, nil)
	}
}

// releaseKeys are the releases the root package's syntax declares, when it
// declares them plainly (labels written out, no embedding or comprehension
// at the top that could declare more).
func releaseKeys(root *build.Instance) ([]string, bool) {
	var keys []string
	for _, f := range root.Files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.Field:
				if labelName(decl.Label) != "releases" {
					continue
				}
				st, ok := decl.Value.(*ast.StructLit)
				if !ok {
					return nil, false
				}
				for _, el := range st.Elts {
					field, ok := el.(*ast.Field)
					if !ok {
						return nil, false
					}
					if _, pattern := field.Label.(*ast.ListLit); pattern {
						continue
					}
					name := labelName(field.Label)
					if name == "" {
						return nil, false
					}
					if !slices.Contains(keys, name) {
						keys = append(keys, name)
					}
				}
			case *ast.EmbedDecl, *ast.Comprehension:
				return nil, false
			}
		}
	}
	return keys, true
}

// componentNames are the names of the components the module's files
// declare, sorted, when every #components is a literal struct of regular
// fields with plain labels (nothing else in it could add or hide one).
func componentNames(files []*ast.File) ([]string, bool) {
	structs, literal := componentStructs(files)
	if !literal {
		return nil, false
	}
	var names []string
	for _, st := range structs {
		for _, el := range st.Elts {
			switch el := el.(type) {
			case *ast.Field:
				name := labelName(el.Label)
				if id, isIdent := el.Label.(*ast.Ident); !isIdent && !isString(el.Label) || name == "" || el.Constraint != token.ILLEGAL ||
					isIdent && (strings.HasPrefix(id.Name, "#") || strings.HasPrefix(id.Name, "_")) {
					return nil, false
				}
				if !slices.Contains(names, name) {
					names = append(names, name)
				}
			case *ast.CommentGroup, *ast.Attribute:
			default:
				return nil, false
			}
		}
	}
	slices.Sort(names)
	return names, len(names) > 0
}

func isString(l ast.Label) bool {
	lit, ok := l.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING
}

// keepsOut reports whether nothing outside module can read its components:
// the root package writes #components nowhere and names the module's
// package only as a #module's value, and no other package it imports
// imports the module.
func keepsOut(root, module *build.Instance) bool {
	ok := true
	for _, f := range root.Files {
		asModule := map[*ast.Ident]bool{}
		ast.Walk(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if id, isIdent := n.Value.(*ast.Ident); isIdent && labelName(n.Label) == "#module" {
					asModule[id] = true
				}
			case *ast.Ident:
				if n.Name == "#components" || !asModule[n] && importOf(n) != "" && root.LookupImport(importOf(n)) == module {
					ok = false
				}
			}
			return ok
		}, nil)
	}
	seen := map[*build.Instance]bool{module: true}
	var walk func(inst *build.Instance)
	walk = func(inst *build.Instance) {
		for _, imp := range inst.Imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			if slices.ContainsFunc(imp.Imports, func(i *build.Instance) bool { return i.ImportPath == module.ImportPath }) {
				ok = false
			}
			walk(imp)
		}
	}
	walk(root)
	return ok
}

// configRead is what a component's syntax reads of the module's #config:
// the top-level fields it selects, or (all) possibly anything — #config
// whole, or any name outside the component but the packages it imports
// and CUE's own (a module's field may itself read #config).
type configRead struct {
	all  bool
	keys []string
}

// reads reports whether a component reading r may read a field of moved.
func (r configRead) reads(moved []string) bool {
	return r.all || slices.ContainsFunc(r.keys, func(k string) bool { return slices.Contains(moved, k) })
}

// predeclared are CUE's predeclared identifiers a component may name
// without reading the module (an unresolved name not among them may be a
// field of the package's other files).
var predeclared = map[string]bool{
	"bool": true, "string": true, "bytes": true, "int": true, "float": true, "number": true, "null": true, "_": true,
	"len": true, "close": true, "and": true, "or": true, "div": true, "mod": true, "quo": true, "rem": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true, "uint128": true, "rune": true,
	"int8": true, "int16": true, "int32": true, "int64": true, "int128": true, "float32": true, "float64": true,
}

// configReads is what each component the module's files declare reads of
// #config, by name (see configRead); a component declared twice reads
// what both declarations do.
func configReads(files []*ast.File) map[string]configRead {
	configs := map[ast.Node]bool{} // the module's #config declarations
	for _, f := range files {
		for _, decl := range f.Decls {
			if field, ok := decl.(*ast.Field); ok && labelName(field.Label) == "#config" {
				configs[field.Value] = true // what a reference resolves to
			}
		}
	}
	out := map[string]configRead{}
	structs, _ := componentStructs(files) // the literal ones: what a share builds from
	for _, st := range structs {
		for _, el := range st.Elts {
			c, ok := el.(*ast.Field)
			if !ok {
				continue // a comprehension: the cut keeps it in every share
			}
			if name := labelName(c.Label); name != "" {
				r := componentReads(c, configs)
				prev := out[name]
				out[name] = configRead{all: prev.all || r.all, keys: append(prev.keys, r.keys...)}
			}
		}
	}
	return out
}

// componentStructs are the literal structs of the #components the files
// declare at their top level; literal is false when one of those is written
// otherwise (a reference, a disjunction, …), whose fields no syntax names.
func componentStructs(files []*ast.File) (structs []*ast.StructLit, literal bool) {
	literal = true
	for _, f := range files {
		for _, decl := range f.Decls {
			field, ok := decl.(*ast.Field)
			if !ok || labelName(field.Label) != "#components" {
				continue
			}
			if st, ok := field.Value.(*ast.StructLit); ok {
				structs = append(structs, st)
			} else {
				literal = false
			}
		}
	}
	return structs, literal
}

// componentReads is what the syntax of one component reads of #config.
func componentReads(c *ast.Field, configs map[ast.Node]bool) configRead {
	inside := map[ast.Node]bool{}
	labels := map[*ast.Ident]bool{}
	ast.Walk(c, func(n ast.Node) bool {
		inside[n] = true
		markLabels(n, labels)
		return true
	}, nil)
	isConfig := func(id *ast.Ident) bool {
		return id.Name == "#config" && (id.Node == nil || configs[id.Node])
	}
	var r configRead
	selected := map[*ast.Ident]bool{}
	ast.Walk(c, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && isConfig(id) {
				selected[id] = true
				if key := labelName(n.Sel); key != "" {
					r.keys = append(r.keys, key)
				} else {
					r.all = true
				}
			}
		case *ast.Ident:
			switch {
			case labels[n] || selected[n]:
			case n.Node != nil && inside[n.Node]:
			case n.Node != nil:
				if _, imported := n.Node.(*ast.ImportSpec); !imported {
					r.all = true // #config whole, or a field of the module
				}
			case !predeclared[n.Name]:
				r.all = true
			}
		}
		return !r.all
	}, nil)
	return r
}
