package load

import (
	"fmt"
	"regexp"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/errors"
)

// unusedImportRE matches CUE's message for an import nothing refers to.
var unusedImportRE = regexp.MustCompile(`imported and not used: "([^"]+)"(?: as (\S+))?`)

// shadowedImports explains CUE's "imported and not used" when the import
// is in fact used by name, but every use resolves to a field of the same
// name instead (`import orders "…"` then `releases: orders: #module:
// orders`): CUE's message alone points at the import line and says nothing
// of the field. It returns one explanation per such import, or nothing.
func shadowedImports(insts []*build.Instance, err error) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range errors.Errors(err) {
		m := unusedImportRE.FindStringSubmatch(e.Error())
		if m == nil {
			continue
		}
		path, alias := m[1], m[2]
		if alias == "" {
			alias = defaultImportName(path)
		}
		if seen[path+" "+alias] {
			continue
		}
		seen[path+" "+alias] = true
		for _, inst := range insts {
			if h := shadowIn(inst, path, alias); h != "" {
				out = append(out, h)
				break
			}
		}
	}
	return out
}

// defaultImportName is the name an import without an alias binds: the last
// path element, without a major version or a package qualifier.
func defaultImportName(path string) string {
	if i := strings.LastIndex(path, ":"); i >= 0 {
		return path[i+1:]
	}
	path, _, _ = strings.Cut(path, "@")
	return path[strings.LastIndex(path, "/")+1:]
}

// shadowIn looks in inst's files for a use of alias that lands on a field
// labelled alias, and describes the first one.
func shadowIn(inst *build.Instance, path, alias string) string {
	for _, f := range inst.Files {
		var scopes [][]*ast.Field // fields of each enclosing struct
		var at []int              // len(outer) when each scope opened
		var outer []string        // labels of the enclosing fields
		labels := map[ast.Node]bool{}
		found := ""
		ast.Walk(f, func(n ast.Node) bool {
			if found != "" {
				return false
			}
			switch n := n.(type) {
			case *ast.File:
				scopes, at = append(scopes, fieldsOf(n.Decls)), append(at, len(outer))
			case *ast.StructLit:
				scopes, at = append(scopes, fieldsOf(n.Elts)), append(at, len(outer))
			case *ast.Field:
				labels[n.Label] = true
				name, _, _ := ast.LabelName(n.Label)
				outer = append(outer, name)
			case *ast.Ident:
				if labels[n] || n.Name != alias {
					return true
				}
				for i := len(scopes) - 1; i >= 0; i-- {
					for _, fld := range scopes[i] {
						if name, _, _ := ast.LabelName(fld.Label); name == alias {
							fieldPath := strings.Join(append(append([]string(nil), outer[:at[i]]...), name), ".")
							found = describeShadow(path, alias, n, fld, fieldPath)
							return false
						}
					}
				}
			}
			return true
		}, func(n ast.Node) {
			switch n.(type) {
			case *ast.File, *ast.StructLit:
				scopes, at = scopes[:len(scopes)-1], at[:len(at)-1]
			case *ast.Field:
				outer = outer[:len(outer)-1]
			}
		})
		if found != "" {
			return found
		}
	}
	return ""
}

func fieldsOf(decls []ast.Decl) []*ast.Field {
	var out []*ast.Field
	for _, d := range decls {
		if f, ok := d.(*ast.Field); ok {
			out = append(out, f)
		}
	}
	return out
}

func describeShadow(path, alias string, use *ast.Ident, field *ast.Field, fieldPath string) string {
	return fmt.Sprintf("  import %q as %s is shadowed: `%s` at %s refers to the field %s (%s), not to the import,\n"+
		"  because inside a field, its own name means the field.\n"+
		"  Fix: give the import an alias no field uses, and use it where you meant the module:\n"+
		"      import %smod %q\n"+
		"      … %smod",
		path, alias, alias, use.Pos(), fieldPath, field.Pos(), alias, path, alias)
}

// DeclPos is where the root package declares the field at labels (for
// example "releases", "blog"): the position of its label in the user's own
// file, for messages about a field whose evaluated position is that of a
// pattern constraint or of the catalog. Empty when no file declares it.
func (d *Deployment) DeclPos(labels ...string) string {
	for _, f := range d.files {
		if p := declIn(f.Decls, labels); p != "" {
			return p
		}
	}
	return ""
}

func declIn(decls []ast.Decl, labels []string) string {
	for _, decl := range decls {
		fld, ok := decl.(*ast.Field)
		if !ok {
			continue
		}
		if name, _, _ := ast.LabelName(fld.Label); name != labels[0] {
			continue
		}
		if len(labels) == 1 {
			return fld.Label.Pos().String()
		}
		if st, ok := fld.Value.(*ast.StructLit); ok {
			if p := declIn(st.Elts, labels[1:]); p != "" {
				return p
			}
		}
	}
	return ""
}
