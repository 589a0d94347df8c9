package render

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
)

type transformer struct {
	name           string
	value          cue.Value
	requiredFields []string
	requiredValues map[string]string
}

func loadTransformers(d *load.Deployment) ([]transformer, error) {
	provider := d.Catalog.LookupPath(pathProvider)
	ts := provider.LookupPath(cue.ParsePath("transformers"))
	names, err := load.FieldNames(ts)
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("the embedded catalog has no Kubernetes transformers: %v", err)
	}
	out := make([]transformer, 0, len(names))
	for _, n := range names {
		v := ts.LookupPath(cue.MakePath(cue.Str(n)))
		t := transformer{name: n, value: v, requiredValues: map[string]string{}}
		if err := v.LookupPath(cue.ParsePath("requiredFields")).Decode(&t.requiredFields); err != nil {
			return nil, fmt.Errorf("catalog transformer %s: requiredFields: %w", n, err)
		}
		if err := v.LookupPath(cue.ParsePath("requiredValues")).Decode(&t.requiredValues); err != nil {
			return nil, fmt.Errorf("catalog transformer %s: requiredValues: %w", n, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// matches reports whether the component has every required field and value.
func (t transformer) matches(comp cue.Value) bool {
	for _, f := range t.requiredFields {
		if !comp.LookupPath(cue.ParsePath(f)).Exists() {
			return false
		}
	}
	for p, want := range t.requiredValues {
		got, err := comp.LookupPath(cue.ParsePath(p)).String()
		if err != nil || got != want {
			return false
		}
	}
	return true
}

type releaseContext struct {
	release releaseMeta
	env     cue.Value // the environment's metadata, or a value that does not exist
}

var (
	pathContext       = cue.MakePath(cue.Def("#context"))
	pathComponent     = cue.MakePath(cue.Def("#component"))
	pathCtxDef        = cue.MakePath(cue.Def("#TransformerContext"))
	pathCtxRelease    = cue.MakePath(cue.Def("#moduleReleaseMetadata"))
	pathCtxComponent  = cue.MakePath(cue.Def("#componentMetadata"))
	pathCtxEnironment = cue.MakePath(cue.Def("#environmentMetadata"))
)

// renderComponents runs the transformers over every component. The
// transformer context is built once per release and once per component:
// every FillPath re-evaluates the value it fills, so filling the context
// piecewise into each transformer made rendering several times slower.
func renderComponents(cctx *cue.Context, catalog, comps cue.Value, rc releaseContext, transformers []transformer, where string) ([]manifest.Resource, error) {
	names, err := load.FieldNames(comps)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: reading components:\n%s", where, load.Describe(err)))
	}
	relMeta := map[string]any{
		"name": rc.release.name, "namespace": rc.release.namespace, "fqn": rc.release.fqn,
		"version": rc.release.version, "identity": rc.release.identity, "labels": rc.release.labels,
	}
	if len(rc.release.annotations) > 0 {
		relMeta["annotations"] = rc.release.annotations
	}
	relCtx := catalog.LookupPath(pathCtxDef).FillPath(pathCtxRelease, relMeta)
	if rc.env.Exists() {
		relCtx = relCtx.FillPath(pathCtxEnironment, rc.env)
	}
	empty := cctx.CompileString("{}")
	var out []manifest.Resource
	seen := map[manifest.ID]string{}
	for _, name := range names {
		comp := comps.LookupPath(cue.MakePath(cue.Str(name)))
		compWhere := fmt.Sprintf("%s, component %q", where, name)
		if err := comp.Validate(cue.Concrete(true)); err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s is incomplete or invalid:\n%s", compWhere, load.Describe(err)))
		}
		compCtx := relCtx.FillPath(pathCtxComponent, comp.LookupPath(cue.ParsePath("metadata")))
		// One small value carries both inputs; unifying it into each
		// transformer costs one evaluation instead of two FillPaths.
		inputs := empty.FillPath(pathComponent, comp).FillPath(pathContext, compCtx)
		matched := 0
		for _, t := range transformers {
			if !t.matches(comp) {
				continue
			}
			matched++
			tv := t.value.Unify(inputs)
			objs, err := outputs(tv.LookupPath(cue.ParsePath("output")))
			if err != nil {
				return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s, transformer %q:\n%s", compWhere, t.name, load.Describe(err)))
			}
			for _, o := range objs {
				res := manifest.Resource{Object: o, Component: name}
				id := res.ID()
				if id.Name == "" || id.Kind == "" || o.GetAPIVersion() == "" {
					return nil, fault.Validationf("%s, transformer %q: an output object has no apiVersion, kind or metadata.name", compWhere, t.name)
				}
				if other, dup := seen[id]; dup {
					return nil, fault.Validationf("%s: %s is also rendered by component %q; two components cannot produce the same object", compWhere, id, other)
				}
				seen[id] = name
				out = append(out, res)
			}
		}
		if matched == 0 {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s matches no transformer of the kubernetes provider (at %s); a component needs one of: workload (type stateless|stateful|daemon|task|scheduled-task), service, configs, secrets, volumes, ingress (with service), serviceAccount", compWhere, comp.Pos()))
		}
	}
	return out, nil
}

func outputs(v cue.Value) ([]*unstructured.Unstructured, error) {
	if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, err
	}
	it, err := v.List()
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for it.Next() {
		b, err := it.Value().MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// valuePath is the dotted path below #config of a CUE error path
// (releases.x.#module.#config.a.b → a.b), or "" when it is not about values.
func valuePath(path []string) string {
	i := slices.Index(path, "#config")
	if i < 0 {
		return ""
	}
	return strings.Join(path[i+1:], ".")
}
