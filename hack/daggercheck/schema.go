package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dagger/dagger/cmd/codegen/introspection"
	"github.com/vektah/gqlparser/v2"
	gql "github.com/vektah/gqlparser/v2/ast"
)

// moduleSchema builds the introspection JSON the engine hands a Go module's
// code generator, from the pinned dagger module's own files: the core API as
// SDL (docs/docs-graphql/schema.graphqls), the enum aliases and the types
// hidden from modules as declared in its Go source (core/). No engine runs
// here, so this is the closest offline stand-in for the engine's
// __schemaJSONFile.
func moduleSchema(daggerDir, engineVersion string) (*introspection.Response, error) {
	sdlPath := filepath.Join(daggerDir, "docs", "docs-graphql", "schema.graphqls")
	sdl, err := os.ReadFile(sdlPath)
	if err != nil {
		return nil, fmt.Errorf("reading the core API schema: %w", err)
	}
	schema, gerr := gqlparser.LoadSchema(&gql.Source{Name: sdlPath, Input: string(sdl)})
	if gerr != nil {
		return nil, fmt.Errorf("parsing %s: %w", sdlPath, gerr)
	}
	core, err := parseCore(filepath.Join(daggerDir, "core"))
	if err != nil {
		return nil, err
	}
	resp := &introspection.Response{SchemaVersion: engineVersion, Schema: &introspection.Schema{}}
	resp.Schema.QueryType.Name = schema.Query.Name

	names := make([]string, 0, len(schema.Types))
	for name := range schema.Types {
		if !strings.HasPrefix(name, "__") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		resp.Schema.Types = append(resp.Schema.Types, typeOf(schema.Types[name]))
	}
	fillKinds(resp.Schema)
	dirNames := make([]string, 0, len(schema.Directives))
	for name := range schema.Directives {
		dirNames = append(dirNames, name)
	}
	sort.Strings(dirNames)
	for _, name := range dirNames {
		d := schema.Directives[name]
		def := &introspection.DirectiveDef{Name: d.Name, Description: d.Description, Args: introspection.InputValues{}}
		for _, l := range d.Locations {
			def.Locations = append(def.Locations, string(l))
		}
		for _, a := range d.Arguments {
			def.Args = append(def.Args, inputValue(a.Name, a.Description, a.Type, a.DefaultValue, a.Directives))
		}
		resp.Schema.Directives = append(resp.Schema.Directives, def)
	}

	// The SDL lists an alias (GZIP) and its value (Gzip) as two plain enum
	// values; the engine marks the alias with @enumValue so that generators
	// emit one constant for both.
	for _, a := range core.aliases {
		if err := markAlias(resp.Schema, a); err != nil {
			return nil, err
		}
	}
	for _, hidden := range core.hidden {
		if resp.Schema.Types.Get(hidden) == nil {
			return nil, fmt.Errorf("core/ hides type %q from modules but the schema has no such type", hidden)
		}
		resp.Schema.ScrubType(hidden)
		resp.Schema.ScrubType(hidden + "ID")
	}
	return resp, nil
}

func typeOf(d *gql.Definition) *introspection.Type {
	t := &introspection.Type{Kind: introspection.TypeKind(d.Kind), Name: d.Name, Description: d.Description,
		Interfaces: []*introspection.Type{}, Directives: directives(d.Directives)}
	switch d.Kind {
	case gql.Object, gql.Interface:
		for _, f := range d.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			field := &introspection.Field{Name: f.Name, Description: f.Description, TypeRef: gqlTypeRef(f.Type),
				Args: introspection.InputValues{}, Directives: directives(f.Directives)}
			field.IsDeprecated, field.DeprecationReason = deprecation(f.Directives)
			for _, a := range f.Arguments {
				field.Args = append(field.Args, inputValue(a.Name, a.Description, a.Type, a.DefaultValue, a.Directives))
			}
			t.Fields = append(t.Fields, field)
		}
		for _, i := range d.Interfaces {
			t.Interfaces = append(t.Interfaces, &introspection.Type{Kind: introspection.TypeKindInterface, Name: i})
		}
	case gql.InputObject:
		for _, f := range d.Fields {
			t.InputFields = append(t.InputFields, inputValue(f.Name, f.Description, f.Type, f.DefaultValue, f.Directives))
		}
	case gql.Enum:
		for _, v := range d.EnumValues {
			ev := introspection.EnumValue{Name: v.Name, Description: v.Description, Directives: directives(v.Directives)}
			ev.IsDeprecated, ev.DeprecationReason = deprecation(v.Directives)
			t.EnumValues = append(t.EnumValues, ev)
		}
	}
	return t
}

func inputValue(name, desc string, typ *gql.Type, def *gql.Value, dirs gql.DirectiveList) introspection.InputValue {
	v := introspection.InputValue{Name: name, Description: desc, TypeRef: gqlTypeRef(typ), Directives: directives(dirs)}
	if def != nil {
		s := def.String()
		v.DefaultValue = &s
	}
	v.IsDeprecated, v.DeprecationReason = deprecation(dirs)
	return v
}

func gqlTypeRef(t *gql.Type) *introspection.TypeRef {
	if t.NonNull {
		inner := *t
		inner.NonNull = false
		return &introspection.TypeRef{Kind: introspection.TypeKindNonNull, OfType: gqlTypeRef(&inner)}
	}
	if t.Elem != nil {
		return &introspection.TypeRef{Kind: introspection.TypeKindList, OfType: gqlTypeRef(t.Elem)}
	}
	return &introspection.TypeRef{Kind: "", Name: t.NamedType}
}

func directives(list gql.DirectiveList) introspection.Directives {
	out := introspection.Directives{}
	for _, d := range list {
		dir := &introspection.Directive{Name: d.Name, Args: []*introspection.DirectiveArg{}}
		for _, a := range d.Arguments {
			v, err := a.Value.Value(nil)
			if err != nil {
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			s := string(b)
			dir.Args = append(dir.Args, &introspection.DirectiveArg{Name: a.Name, Value: &s})
		}
		out = append(out, dir)
	}
	return out
}

func deprecation(list gql.DirectiveList) (bool, *string) {
	d := list.ForName("deprecated")
	if d == nil {
		return false, nil
	}
	reason := "No longer supported"
	if a := d.Arguments.ForName("reason"); a != nil {
		reason = a.Value.Raw
	}
	return true, &reason
}

// fillKinds sets the kind of every named type reference, which the SDL
// leaves implicit and introspection spells out.
func fillKinds(s *introspection.Schema) {
	kinds := map[string]introspection.TypeKind{}
	for _, t := range s.Types {
		kinds[t.Name] = t.Kind
	}
	var fill func(r *introspection.TypeRef)
	fill = func(r *introspection.TypeRef) {
		if r == nil {
			return
		}
		if r.OfType != nil {
			fill(r.OfType)
			return
		}
		r.Kind = kinds[r.Name]
	}
	for _, t := range s.Types {
		for _, f := range t.Fields {
			fill(f.TypeRef)
			for i := range f.Args {
				fill(f.Args[i].TypeRef)
			}
		}
		for i := range t.InputFields {
			fill(t.InputFields[i].TypeRef)
		}
	}
	for _, d := range s.Directives {
		for i := range d.Args {
			fill(d.Args[i].TypeRef)
		}
	}
}

type alias struct{ name, underlying string }

func markAlias(s *introspection.Schema, a alias) error {
	found := 0
	for _, t := range s.Types {
		if t.Kind != introspection.TypeKindEnum {
			continue
		}
		ai, ui := -1, -1
		for i, v := range t.EnumValues {
			switch v.Name {
			case a.name:
				ai = i
			case a.underlying:
				ui = i
			}
		}
		if ai < 0 || ui < 0 {
			continue
		}
		found++
		value := strconv.Quote(a.underlying)
		t.EnumValues[ai].Directives = append(t.EnumValues[ai].Directives, &introspection.Directive{
			Name: "enumValue", Args: []*introspection.DirectiveArg{{Name: "value", Value: &value}}})
	}
	if found != 1 {
		return fmt.Errorf("enum alias %s of %s: found in %d enums of the schema, want 1", a.name, a.underlying, found)
	}
	return nil
}

// coreFacts is what the engine's Go source says beyond the SDL.
type coreFacts struct {
	aliases []alias
	hidden  []string
}

// parseCore reads core/*.go for enum aliases (X.AliasView("GZIP", "Gzip",
// …)) and for the types the engine scrubs from a module's schema
// (TypesHiddenFromModuleSDKs, TypesToIgnoreForModuleIntrospection).
func parseCore(dir string) (coreFacts, error) {
	var facts coreFacts
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return facts, err
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return facts, fmt.Errorf("parsing %s: %w", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Alias" && sel.Sel.Name != "AliasView") || len(n.Args) < 2 {
					return true
				}
				name, ok1 := stringLit(n.Args[0])
				under, ok2 := stringLit(n.Args[1])
				if ok1 && ok2 {
					facts.aliases = append(facts.aliases, alias{name, under})
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i >= len(n.Values) {
						break
					}
					switch id.Name {
					case "TypesHiddenFromModuleSDKs":
						facts.hidden = append(facts.hidden, compositeTypeNames(n.Values[i])...)
					case "TypesToIgnoreForModuleIntrospection":
						facts.hidden = append(facts.hidden, stringElems(n.Values[i])...)
					}
				}
			}
			return true
		})
	}
	if len(facts.aliases) == 0 || len(facts.hidden) == 0 {
		return facts, fmt.Errorf("%s: found %d enum aliases and %d hidden types; the engine source moved, update hack/daggercheck", dir, len(facts.aliases), len(facts.hidden))
	}
	return facts, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// compositeTypeNames reads []dagql.Typed{&Engine{}, …} as Engine, ….
func compositeTypeNames(e ast.Expr) []string {
	var out []string
	if cl, ok := e.(*ast.CompositeLit); ok {
		for _, el := range cl.Elts {
			if u, ok := el.(*ast.UnaryExpr); ok {
				el = u.X
			}
			if c, ok := el.(*ast.CompositeLit); ok {
				if id, ok := c.Type.(*ast.Ident); ok {
					out = append(out, id.Name)
				}
			}
		}
	}
	return out
}

func stringElems(e ast.Expr) []string {
	var out []string
	if cl, ok := e.(*ast.CompositeLit); ok {
		for _, el := range cl.Elts {
			if s, ok := stringLit(el); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
