package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dagger/dagger/cmd/codegen/introspection"
	"github.com/iancoleman/strcase"
)

// api is what `dagger call` can reach: the module's objects and the core
// types, by GraphQL name.
type api struct {
	module      string // the module's main object, e.g. "Opm"
	types       map[string]*object
	description string // the package comment, which the engine and the Daggerverse show
}

type object struct {
	name   string
	fields map[string]*member // by CLI name (kebab-case)
}

// member is a field or function of an object.
type member struct {
	name   string // CLI name
	args   map[string]*arg
	result typeRef
}

type arg struct {
	name     string // CLI flag name without "--"
	boolean  bool
	required bool
}

// typeRef is a result type: an object (possibly a list of them) or a
// scalar, which ends a call chain.
type typeRef struct {
	object string // empty for a scalar or enum
	list   bool
}

func cliName(s string) string { return strcase.ToKebab(s) }

// moduleAPI reads the module's functions and their arguments from the
// generated dagger.gen.go (its invoke switch is what the engine dispatches
// on: object, function and input-argument names), and fields, results and
// optional markers from the module's own source, the way the Go SDK's
// codegen reads them.
func moduleAPI(genFile, moduleName string, schema *introspection.Response) (*api, error) {
	a := &api{module: strcase.ToCamel(moduleName), types: map[string]*object{}}
	for _, t := range schema.Schema.Types {
		if t.Kind != introspection.TypeKindObject {
			continue
		}
		o := &object{name: t.Name, fields: map[string]*member{}}
		for _, f := range t.Fields {
			m := &member{name: cliName(f.Name), args: map[string]*arg{}, result: schemaRef(f.TypeRef)}
			for _, in := range f.Args {
				m.args[cliName(in.Name)] = &arg{name: cliName(in.Name), boolean: schemaBool(in.TypeRef), required: !in.IsOptional()}
			}
			o.fields[m.name] = m
		}
		a.types[t.Name] = o
	}

	dir := filepath.Dir(genFile)
	fset := token.NewFileSet()
	gen, err := parser.ParseFile(fset, genFile, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parsing the generated %s: %w", genFile, err)
	}
	invoked := invokeSwitch(gen)
	if len(invoked[a.module]) == 0 {
		return nil, fmt.Errorf("%s dispatches no function of %s", genFile, a.module)
	}

	src, err := parseModuleSource(fset, dir)
	if err != nil {
		return nil, err
	}
	a.description = strings.TrimSpace(src.doc)
	for objName, fns := range invoked {
		o := a.types[objName]
		if o == nil {
			o = &object{name: objName, fields: map[string]*member{}}
			a.types[objName] = o
		}
		for fnName, args := range fns {
			decl := src.funcs[objName+"."+fnName]
			if fnName == "" {
				decl = src.funcs["New"]
			}
			if decl == nil {
				return nil, fmt.Errorf("dagger.gen.go dispatches %s.%s but the source has no such function", objName, fnName)
			}
			m := &member{name: cliName(strcase.ToLowerCamel(fnName)), args: map[string]*arg{}}
			if decl.Type.Results != nil && len(decl.Type.Results.List) > 0 {
				m.result = goRef(decl.Type.Results.List[0].Type)
			}
			opt := src.optionalParams(decl)
			for _, in := range args {
				flag := cliName(in.name)
				m.args[flag] = &arg{name: flag, boolean: in.goType == "bool", required: !opt[in.name]}
			}
			o.fields[m.name] = m
		}
	}
	for typeName, fields := range src.fields {
		o := a.types[typeName]
		if o == nil {
			o = &object{name: typeName, fields: map[string]*member{}}
			a.types[typeName] = o
		}
		for _, f := range fields {
			o.fields[cliName(strcase.ToLowerCamel(f.name))] = &member{name: cliName(strcase.ToLowerCamel(f.name)), args: map[string]*arg{}, result: goRef(f.typ)}
		}
	}
	return a, nil
}

type invokedArg struct{ name, goType string }

// invokeSwitch reads dagger.gen.go's invoke: switch parentName { case
// "Opm": switch fnName { case "Render": … inputArgs["env"] … } }. The
// constructor is fnName "".
func invokeSwitch(f *ast.File) map[string]map[string][]invokedArg {
	out := map[string]map[string][]invokedArg{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "invoke" || fn.Body == nil {
			continue
		}
		for _, st := range fn.Body.List {
			outer, ok := st.(*ast.SwitchStmt)
			if !ok {
				continue
			}
			for _, c := range outer.Body.List {
				cc := c.(*ast.CaseClause)
				if len(cc.List) != 1 {
					continue
				}
				parent, ok := stringLit(cc.List[0])
				if !ok {
					continue
				}
				out[parent] = map[string][]invokedArg{}
				for _, inner := range cc.Body {
					sw, ok := inner.(*ast.SwitchStmt)
					if !ok {
						continue
					}
					for _, c2 := range sw.Body.List {
						fc := c2.(*ast.CaseClause)
						if len(fc.List) != 1 {
							continue
						}
						fnName, ok := stringLit(fc.List[0])
						if !ok {
							continue
						}
						out[parent][fnName] = invokedArgs(fc.Body)
					}
				}
			}
		}
	}
	return out
}

func invokedArgs(body []ast.Stmt) []invokedArg {
	types := map[string]string{}
	var args []invokedArg
	seen := map[string]bool{}
	for _, st := range body {
		ast.Inspect(st, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for _, id := range n.Names {
					types[id.Name] = exprString(n.Type)
				}
			case *ast.IndexExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "inputArgs" {
					if s, ok := stringLit(n.Index); ok && !seen[s] {
						seen[s] = true
						args = append(args, invokedArg{name: s})
					}
				}
			}
			return true
		})
	}
	for i := range args {
		args[i].goType = types[args[i].name]
	}
	return args
}

type sourceField struct {
	name string
	typ  ast.Expr
}

type moduleSource struct {
	fset     *token.FileSet
	funcs    map[string]*ast.FuncDecl // "Type.Method" or "New"
	fields   map[string][]sourceField // exported, non-private struct fields by type
	comments []*ast.CommentGroup
	doc      string // the package comment: the module's description
}

func parseModuleSource(fset *token.FileSet, dir string) (*moduleSource, error) {
	src := &moduleSource{fset: fset, funcs: map[string]*ast.FuncDecl{}, fields: map[string][]sourceField{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "dagger.gen.go" {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		src.comments = append(src.comments, f.Comments...)
		if f.Doc != nil {
			src.doc += f.Doc.Text()
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					src.funcs[d.Name.Name] = d
					continue
				}
				src.funcs[recvName(d.Recv.List[0].Type)+"."+d.Name.Name] = d
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					src.fields[ts.Name.Name] = []sourceField{}
					for _, fl := range st.Fields.List {
						if hasMarker(fl.Doc, "+private") || hasMarker(fl.Comment, "+private") {
							continue
						}
						for _, id := range fl.Names {
							if id.IsExported() {
								src.fields[ts.Name.Name] = append(src.fields[ts.Name.Name], sourceField{id.Name, fl.Type})
							}
						}
					}
				}
			}
		}
	}
	return src, nil
}

// optionalParams: parameters marked +optional, +default or +defaultPath in
// the comments right above them (the Go SDK's markers).
func (s *moduleSource) optionalParams(fn *ast.FuncDecl) map[string]bool {
	out := map[string]bool{}
	prev := fn.Type.Params.Opening
	for _, p := range fn.Type.Params.List {
		var text strings.Builder
		for _, cg := range s.comments {
			if cg.Pos() > prev && cg.End() <= p.Pos() {
				text.WriteString(cg.Text())
			}
		}
		t := text.String()
		optional := strings.Contains(t, "+optional") || strings.Contains(t, "+default")
		for _, id := range p.Names {
			out[id.Name] = optional
		}
		prev = p.End()
	}
	return out
}

func hasMarker(cg *ast.CommentGroup, marker string) bool {
	return cg != nil && strings.Contains(cg.Text(), marker)
}

func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// goRef maps a Go result type to what dagger call chains through:
// *T / T / []*T of a module object, *dagger.T of a core type, or a scalar.
func goRef(e ast.Expr) typeRef {
	var r typeRef
	if a, ok := e.(*ast.ArrayType); ok {
		r.list = true
		e = a.Elt
	}
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch t := e.(type) {
	case *ast.SelectorExpr:
		r.object = t.Sel.Name // dagger.File → File
	case *ast.Ident:
		if t.IsExported() {
			r.object = t.Name
		}
	}
	return r
}

func schemaRef(t *introspection.TypeRef) typeRef {
	var r typeRef
	for t != nil {
		switch t.Kind {
		case introspection.TypeKindList:
			r.list = true
		case introspection.TypeKindObject:
			r.object = t.Name
		}
		t = t.OfType
	}
	return r
}

func schemaBool(t *introspection.TypeRef) bool {
	for t != nil {
		if t.Name == "Boolean" {
			return true
		}
		t = t.OfType
	}
	return false
}

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.ArrayType:
		return "[]" + exprString(t.Elt)
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	}
	return ""
}

// names lists an object's members for error messages.
func (o *object) names() string {
	var n []string
	for k := range o.fields {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

func (m *member) flagNames() string {
	var n []string
	for k := range m.args {
		n = append(n, "--"+k)
	}
	sort.Strings(n)
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}
