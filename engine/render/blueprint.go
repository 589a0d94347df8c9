package render

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"

	"github.com/opmodel/pipeline/engine/load"
)

// BlueprintRegressionDoc is where the known CUE regression and its
// workarounds are documented.
const BlueprintRegressionDoc = "docs/opm-modules.md#blueprints-and-the-cue-v017-closedness-regression"

// blueprintRegression recognises cuelang.org/go v0.17's closedness
// regression: a component built from a blueprint whose closed schema
// declares optional parts that the definition copies into other spec
// fields (`if spec.x.scaling != _|_ {scaling: spec.x.scaling}`, as OPM's
// catalog writes every blueprint) is refused with "field not allowed" for
// a field the schema does declare. v0.16 accepts it; no release served by
// the module proxy fixes it (engine/render's TestBlueprintRegression
// tracks it).
//
// It returns the blueprints involved and the fields CUE refused when every
// error in err is such a refusal, explained by a blueprint's own schema;
// otherwise nothing, and err is a genuine mistake.
type blueprintRegression struct {
	blueprints []string // FQNs
	fields     []string // spec paths CUE refused, e.g. web.spec.scaledWeb.autoscaling
}

func (b *blueprintRegression) hint() string {
	return fmt.Sprintf("this is a known CUE v0.17 closedness regression, not a mistake in the module: "+
		"blueprint %s declares %s; see %s", strings.Join(b.blueprints, ", "), strings.Join(b.fields, ", "), BlueprintRegressionDoc)
}

func (b *blueprintRegression) warning() string {
	return fmt.Sprintf("rendered with CUE's definition closedness relaxed: cuelang.org/go v0.17 refuses %s, which blueprint %s declares "+
		"(a known CUE regression, %s); every field it refused was checked against the blueprint's schema instead",
		strings.Join(b.fields, ", "), strings.Join(b.blueprints, ", "), BlueprintRegressionDoc)
}

// blueprintRegressionError is the strict render's error when it is the
// regression: the plan renders again with the workaround.
type blueprintRegressionError struct {
	bp  *blueprintRegression
	err error
}

func (e *blueprintRegressionError) Error() string { return e.err.Error() }
func (e *blueprintRegressionError) Unwrap() error { return e.err }

func detectBlueprintRegression(err error, rel cue.Value) *blueprintRegression {
	errs := cueerrors.Errors(err)
	if len(errs) == 0 {
		return nil
	}
	out := &blueprintRegression{}
	for _, e := range errs {
		if !strings.Contains(e.Error(), "field not allowed") {
			return nil
		}
		path := e.Path()
		i := slices.Index(path, "#components")
		// #components.<component>.spec.<blueprint field>.<refused field>…
		if i < 0 || len(path) < i+5 || path[i+2] != "spec" {
			return nil
		}
		comp, field, refused := path[i+1], path[i+3], path[i+4]
		bp := declaringBlueprint(rel, comp, field, refused)
		if bp == "" {
			return nil
		}
		if !slices.Contains(out.blueprints, bp) {
			out.blueprints = append(out.blueprints, bp)
		}
		f := strings.Join([]string{comp, "spec", field, refused}, ".")
		if !slices.Contains(out.fields, f) {
			out.fields = append(out.fields, f)
		}
	}
	return out
}

// declaringBlueprint is the FQN of a blueprint of the component whose
// #spec.<field> schema declares refused, or "".
func declaringBlueprint(rel cue.Value, comp, field, refused string) string {
	bps := rel.LookupPath(pathModule).LookupPath(cue.MakePath(pathComponents.Selectors()[0], cue.Str(comp), cue.Def("#blueprints")))
	it, err := bps.Fields()
	if err != nil {
		return ""
	}
	for it.Next() {
		schema := it.Value().LookupPath(cue.MakePath(cue.Def("#spec"), cue.Str(field)))
		if !schema.Exists() {
			continue
		}
		fields, err := schema.Fields(cue.Optional(true))
		if err != nil {
			continue
		}
		for fields.Next() {
			if fields.Selector().Unquoted() == refused {
				return it.Selector().Unquoted()
			}
		}
	}
	return ""
}

// withBlueprintWorkaround renders key again in a deployment loaded with
// definition closedness relaxed, when the strict render failed only
// because of the CUE regression above. Every field the strict evaluation
// refused was matched to a field of a blueprint schema, so relaxing
// closedness accepts nothing the schemas do not declare.
func (p *plan) withBlueprintWorkaround(key string, bp *blueprintRegression) (*Release, error) {
	d, err := load.LoadWith(p.ctx, p.d.Dir, load.Options{RelaxedClosedness: true, Overlay: p.d.Overlay})
	if err != nil {
		return nil, err
	}
	open, err := prepare(p.ctx, d, p.opts)
	if err != nil {
		return nil, err
	}
	r, err := open.renderOnce(key)
	if err != nil {
		return nil, err
	}
	r.Warnings = append(r.Warnings, bp.warning())
	return r, nil
}
