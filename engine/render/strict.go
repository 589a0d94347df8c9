package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/suggest"
)

// Strict components.
//
// A component embeds its definitions (`core.#Workload`, `core.#Ingress`, …)
// and fills their fields in `spec`. CUE closes an embedded definition only
// at the top: fields the component itself declares are allowed at every
// level below, so `spec: ingress: tlsSecret: "x"` (for tlsSecretName) or
// `spec: bogus: 1` would evaluate, render nothing and say nothing. The
// render therefore checks each component's spec itself, the way `kubectl
// apply --validate=strict` checks an object: every spec field must be
// declared by one of the component's resources, traits or blueprints, and
// every value must unify with that definition's closed schema. A mistake is
// a validation error naming the field path, the user's file:line:col and
// the allowed names closest to it.

// specSchemas maps each spec field a component may set to the schemas its
// definitions give it (a blueprint and a resource may both declare one).
func specSchemas(comp cue.Value) map[string][]cue.Value {
	out := map[string][]cue.Value{}
	for _, kind := range []string{"#resources", "#traits", "#blueprints"} {
		defs, err := comp.LookupPath(cue.MakePath(cue.Def(kind))).Fields()
		if err != nil {
			continue
		}
		for defs.Next() {
			spec := defs.Value().LookupPath(cue.MakePath(cue.Def("#spec")))
			fields, err := spec.Fields(cue.Optional(true))
			if err != nil {
				continue
			}
			for fields.Next() {
				k := fields.Selector().Unquoted()
				out[k] = append(out[k], fields.Value())
			}
		}
	}
	return out
}

// specProblem is one mistake in a component's spec.
type specProblem struct {
	path string // spec.ingress.tlsSecret
	pos  []token.Pos
	msg  string
}

// checkSpec returns the mistakes in comp's spec. owners maps a spec field
// to the catalog definition a component embeds to get it (for "add
// core.#DisruptionBudget"); it is called only for a field not allowed.
func checkSpec(comp cue.Value, owners func() map[string]string, scope cue.Value) []specProblem {
	spec := comp.LookupPath(cue.ParsePath("spec"))
	fields, err := spec.Fields()
	if err != nil {
		return nil
	}
	schemas := specSchemas(comp)
	allowed := make([]string, 0, len(schemas))
	for k := range schemas {
		allowed = append(allowed, k)
	}
	slices.Sort(allowed)
	var out []specProblem
	for fields.Next() {
		name := fields.Selector().Unquoted()
		v := fields.Value()
		ss, ok := schemas[name]
		if !ok {
			msg := fmt.Sprintf("field not allowed: the component's definitions declare %s", listOr(allowed, "no spec fields"))
			if owner := owners()[name]; owner != "" {
				msg = fmt.Sprintf("field not allowed: spec.%s needs the definition that declares it; add the line `%s` to the component", name, owner)
			} else if s := suggest.DidYouMean(name, allowed); s != "" {
				msg = "field not allowed; " + s
			}
			out = append(out, specProblem{path: "spec." + name, pos: userPos(v), msg: msg})
			continue
		}
		for _, schema := range ss {
			out = append(out, checkAgainst(schema, v, scope, "spec."+name)...)
		}
	}
	return out
}

// checkAgainst unifies the component's value with the definition's closed
// schema; CUE then refuses fields the schema does not declare, at any
// depth.
func checkAgainst(schema, v, scope cue.Value, prefix string) []specProblem {
	err := schema.Unify(v).Validate()
	if err == nil {
		return nil
	}
	var out []specProblem
	seen := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		if !strings.Contains(e.Error(), "field not allowed") {
			continue // type errors are CUE's own, reported by the release's validation
		}
		rel := relativePath(e.Path(), strings.TrimPrefix(prefix, "spec."), schema, v)
		path := strings.Join(append([]string{prefix}, rel...), ".")
		if seen[path] {
			continue
		}
		seen[path] = true
		msg := "field not allowed"
		if len(rel) > 0 {
			names := fieldNames(lookupSchema(schema, rel[:len(rel)-1], scope), scope)
			if s := suggest.DidYouMean(rel[len(rel)-1], names); s != "" {
				msg += "; " + s
			} else if len(names) > 0 {
				msg += "; allowed: " + strings.Join(names, ", ")
			}
		}
		out = append(out, specProblem{path: path, pos: userPositions(cueerrors.Positions(e)), msg: msg})
	}
	return out
}

// relativePath is an error's path below the spec field: CUE reports it
// from the root of whichever value the error arose in.
func relativePath(path []string, field string, values ...cue.Value) []string {
	// Inside a definition's schema: …#spec.<field>.<rest>.
	for i := len(path) - 2; i >= 0; i-- {
		if path[i] == "#spec" && path[i+1] == field {
			return path[i+2:]
		}
	}
	for _, v := range values {
		var base []string
		for _, sel := range v.Path().Selectors() {
			base = append(base, sel.String())
		}
		if len(base) > 0 && len(path) >= len(base) && slices.Equal(path[:len(base)], base) {
			return path[len(base):]
		}
	}
	return path
}

// schemaFields iterates a struct schema's fields, optional and required
// ones too, and those of every form of a disjunction.
func schemaFields(v, scope cue.Value) func(yield func(string, cue.Value) bool) {
	return func(yield func(string, cue.Value) bool) {
		if !v.Exists() {
			return
		}
		if it, err := v.Fields(cue.Optional(true)); err == nil {
			for it.Next() {
				if !yield(it.Selector().Unquoted(), it.Value()) {
					return
				}
			}
			return
		}
		switch op, args := v.Expr(); {
		case op == cue.OrOp || op == cue.AndOp:
			for _, a := range args {
				for n, fv := range schemaFields(a, scope) {
					if !yield(n, fv) {
						return
					}
				}
			}
		case op == cue.SelectorOp && len(args) == 2:
			// A reference to a definition (#EnvFromSchema): CUE does not
			// say in which package, so it is looked up in scope (the catalog).
			if label, err := args[1].String(); err == nil && strings.HasPrefix(label, "#") && scope.Exists() {
				for n, fv := range schemaFields(scope.LookupPath(cue.ParsePath(label)), scope) {
					if !yield(n, fv) {
						return
					}
				}
			}
		}
	}
}

// lookupSchema follows labels through a schema's fields, optional and
// required ones included (LookupPath finds regular fields only).
func lookupSchema(v cue.Value, labels []string, scope cue.Value) cue.Value {
	for _, l := range labels {
		next := cue.Value{}
		for name, fv := range schemaFields(v, scope) {
			if name == l {
				next = fv
				break
			}
		}
		if !next.Exists() {
			// A list element or an entry of a map: the element's schema.
			if _, err := strconv.Atoi(l); err == nil {
				next = v.LookupPath(cue.MakePath(cue.AnyIndex))
			} else {
				next = v.LookupPath(cue.MakePath(cue.AnyString))
			}
		}
		if !next.Exists() {
			return next
		}
		v = next
	}
	return v
}

// fieldNames lists a schema struct's declared fields, optional ones too;
// for a disjunction of structs, the fields of every form.
func fieldNames(v, scope cue.Value) []string {
	var names []string
	for n := range schemaFields(v, scope) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// userPos is where the user's files set v: positions outside the embedded
// catalog, else whatever CUE knows.
func userPos(v cue.Value) []token.Pos {
	var all []token.Pos
	op, conjuncts := v.Expr()
	if op != cue.AndOp {
		conjuncts = []cue.Value{v}
	}
	for _, c := range conjuncts {
		all = append(all, c.Pos())
	}
	all = append(all, v.Pos())
	return userPositions(all)
}

func userPositions(all []token.Pos) []token.Pos {
	var out []token.Pos
	for _, p := range all {
		if p.IsValid() && !strings.HasPrefix(p.Filename(), load.EmbeddedRoot) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func listOr(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	return strings.Join(names, ", ")
}

// describeSpecProblems is the error text: one block per mistake, as
// load.Describe prints CUE's own errors.
func describeSpecProblems(comp string, problems []specProblem) string {
	var b strings.Builder
	for i, p := range problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "  #components.%s.%s: %s", comp, p.path, p.msg)
		for _, pos := range p.pos {
			b.WriteString("\n      " + pos.String())
		}
	}
	return b.String()
}

// catalogOwners maps each spec field of the embedded catalog to the
// mixin a component embeds to declare it (spec.disruptionBudget →
// core.#DisruptionBudget), read from the catalog itself.
func catalogOwners(catalog cue.Value) map[string]string {
	out := map[string]string{}
	it, err := catalog.Fields(cue.Definitions(true))
	if err != nil {
		return out
	}
	for it.Next() {
		v := it.Value()
		if k, _ := v.LookupPath(cue.ParsePath("kind")).String(); k != "Component" {
			continue
		}
		name := it.Selector().String()
		fields := specSchemas(v)
		// A mixin that declares exactly one field owns it; a blueprint or
		// a component built of several would be a worse suggestion.
		if len(fields) != 1 {
			continue
		}
		for f := range fields {
			if _, taken := out[f]; !taken {
				out[f] = "core." + name
			}
		}
	}
	return out
}
