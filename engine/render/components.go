package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/opmv2"
	"github.com/opmodel/pipeline/engine/suggest"
)

// transformer is one transformer of a provider, with what it requires of a
// component. In the OPM component model a transformer matches a component
// when the component has every required label (same value), every required
// resource and every required trait, keyed by FQN; it renders through
// #transform with #component and #context filled in.
type transformer struct {
	provider string
	fqn      string
	// value is the transformer's #transform.
	value cue.Value
	// pos is where the transformer is declared: errors about its output
	// point there.
	pos token.Pos
	// envAware: its #context declares #environmentMetadata (seed 002), so
	// the environment is passed as such rather than folded into the
	// release's labels and annotations.
	envAware bool
	// sharedContext: its #context declares nothing of its own (`_`, as the
	// catalog's transformers write it), so it takes the catalog's
	// #TransformerContext as the engine evaluated it once for the
	// component. A transformer that declares a context schema evaluates
	// that schema itself, once per transformer.
	sharedContext bool

	requiredLabels                    map[string]string
	requiredResources, requiredTraits []string
	optionalResources, optionalTraits []string
}

func (t transformer) String() string { return fmt.Sprintf("%s (provider %s)", t.fqn, t.provider) }

// embedded reports whether t is the embedded catalog's: its code is part
// of opm's build, and it reads nothing of a component but its spec and
// context.
func (t transformer) embedded() bool { return strings.HasPrefix(t.pos.Filename(), load.EmbeddedRoot) }

// handles reports whether t declares the trait (required or optional).
func (t transformer) handles(trait string) bool {
	return slices.Contains(t.requiredTraits, trait) || slices.Contains(t.optionalTraits, trait)
}

// provider is a named provider value: its transformers map is read.
type provider struct {
	name  string
	value cue.Value
}

var (
	pathProviders    = cue.MakePath(cue.Str("providers"))
	pathTransformers = cue.MakePath(cue.Str("transformers"))
	pathTransform    = cue.MakePath(cue.Def("#transform"))
)

// selectProviders picks the providers a release renders with: the
// environment's `providers` when it declares any, else the deployment
// directory's `providers`, else the embedded catalog's Kubernetes provider
// (the offline default).
func selectProviders(d *load.Deployment, env cue.Value) ([]provider, string, error) {
	for _, src := range []struct {
		v     cue.Value
		where string
	}{{env.LookupPath(pathProviders), "the environment's providers"}, {d.Root.LookupPath(pathProviders), "the deployment's providers"}} {
		if !src.v.Exists() {
			continue
		}
		names, err := load.FieldNames(src.v)
		if err != nil {
			return nil, "", fault.Wrap(fault.Validation, fmt.Errorf("reading %s:\n%s", src.where, load.Describe(err)))
		}
		if len(names) == 0 {
			continue
		}
		var out []provider
		for _, n := range names {
			out = append(out, provider{name: n, value: src.v.LookupPath(cue.MakePath(cue.Str(n)))})
		}
		return out, src.where, nil
	}
	return []provider{{name: "kubernetes", value: d.Catalog.LookupPath(pathProvider)}}, catalogProviderWhere, nil
}

// catalogProviderWhere is how selectProviders names the embedded
// catalog's provider.
const catalogProviderWhere = "the embedded catalog's provider"

// loadTransformers reads every transformer of the providers. Two providers
// may not define the same transformer FQN: which one renders would be a
// guess.
func loadTransformers(providers []provider) ([]transformer, error) {
	var out []transformer
	owner := map[string]string{}
	for _, p := range providers {
		ts := p.value.LookupPath(pathTransformers)
		names, err := load.FieldNames(ts)
		if err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("provider %q: reading transformers:\n%s", p.name, load.Describe(err)))
		}
		if len(names) == 0 {
			return nil, fault.Validationf("provider %q has no transformers (at %s)", p.name, p.value.Pos())
		}
		for _, n := range names {
			if other, dup := owner[n]; dup {
				return nil, fault.Validationf("transformer %s is defined by providers %q and %q; combine providers whose transformers differ", n, other, p.name)
			}
			owner[n] = p.name
			t, err := readTransformer(p.name, n, ts.LookupPath(cue.MakePath(cue.Str(n))))
			if err != nil {
				return nil, fault.Wrap(fault.Validation, fmt.Errorf("provider %q, transformer %s: %w", p.name, n, err))
			}
			out = append(out, t)
		}
	}
	return out, nil
}

func readTransformer(providerName, fqn string, v cue.Value) (transformer, error) {
	t := transformer{provider: providerName, fqn: fqn, value: v.LookupPath(pathTransform), pos: declPos(v)}
	if !t.value.Exists() {
		return t, fmt.Errorf("it has no #transform (at %s); a transformer renders through #transform: {#component, #context, output}", v.Pos())
	}
	ctxSchema := t.value.LookupPath(pathContext)
	t.sharedContext = ctxSchema.IncompleteKind() == cue.TopKind
	t.envAware = t.sharedContext || declares(ctxSchema, "#environmentMetadata")
	var err error
	if t.requiredLabels, err = stringMap(v.LookupPath(cue.ParsePath("requiredLabels"))); err != nil {
		return t, err
	}
	for _, f := range []struct {
		dst  *[]string
		name string
	}{{&t.requiredResources, "requiredResources"}, {&t.requiredTraits, "requiredTraits"}, {&t.optionalResources, "optionalResources"}, {&t.optionalTraits, "optionalTraits"}} {
		if *f.dst, err = load.FieldNames(v.LookupPath(cue.ParsePath(f.name))); err != nil {
			return t, fmt.Errorf("%s: %s", f.name, load.Describe(err))
		}
	}
	return t, nil
}

// declPos is the position of the transformer's own declaration: its
// metadata.name when set there, else the value's.
func declPos(v cue.Value) token.Pos {
	if p := v.LookupPath(cue.ParsePath("metadata.name")).Pos(); p.IsValid() {
		return p
	}
	return v.Pos()
}

// declares reports whether v declares the (possibly optional) field name.
func declares(v cue.Value, name string) bool {
	it, err := v.Fields(cue.Definitions(true), cue.Optional(true))
	if err != nil {
		return false
	}
	for it.Next() {
		if strings.TrimSuffix(it.Selector().String(), "?") == name {
			return true
		}
	}
	return false
}

// component is what matching needs to know of one component.
type component struct {
	name                string
	value               cue.Value
	labels, annotations map[string]string
	resources, traits   []string
}

func readComponent(name string, v cue.Value) (component, error) {
	c := component{name: name, value: v}
	res := v.LookupPath(cue.MakePath(cue.Def("#resources")))
	if !res.Exists() {
		return c, fmt.Errorf("it has no #resources (at %s): a component is built from resources, traits and blueprints, e.g. embed the catalog's #Workload and set spec.workload", v.Pos())
	}
	var err error
	if c.labels, err = anyStringMap(v.LookupPath(cue.ParsePath("metadata.labels"))); err != nil {
		return c, err
	}
	if c.annotations, err = anyStringMap(v.LookupPath(cue.ParsePath("metadata.annotations"))); err != nil {
		return c, err
	}
	if c.resources, err = load.FieldNames(res); err != nil {
		return c, fmt.Errorf("#resources: %s", load.Describe(err))
	}
	if c.traits, err = load.FieldNames(v.LookupPath(cue.MakePath(cue.Def("#traits")))); err != nil {
		return c, fmt.Errorf("#traits: %s", load.Describe(err))
	}
	return c, nil
}

// matches reports whether t renders c.
func (t transformer) matches(c component) bool {
	for k, want := range t.requiredLabels {
		if got, ok := c.labels[k]; !ok || got != want {
			return false
		}
	}
	for _, r := range t.requiredResources {
		if !slices.Contains(c.resources, r) {
			return false
		}
	}
	for _, tr := range t.requiredTraits {
		if !slices.Contains(c.traits, tr) {
			return false
		}
	}
	return true
}

type releaseContext struct {
	release releaseMeta
	env     cue.Value // the environment's metadata, or a value that does not exist
	// platform renders releases of OPM v2 modules: the environment's
	// subscribed catalogs (nil without a subscription).
	platform *opmv2.Platform
	// moduleInstance is core@v2's #ModuleInstance, for OPM v2 modules.
	moduleInstance cue.Value
	// values are an OPM v2 release's effective values, which its
	// instance binds to the module (the older line's module comes with
	// them filled in).
	values cue.Value
	// warnings collects an OPM v2 render's advisories (nil: dropped).
	warnings *[]string
	// transforms is how the components' transforms are cached (no cache
	// for a release with secret values).
	transforms cacheUse
}

var (
	pathContext = cue.MakePath(cue.Def("#context"))
	// pathTransformerContext is the catalog's #TransformerContext.
	pathTransformerContext = cue.MakePath(cue.Def("#TransformerContext"))
	pathComponent          = cue.MakePath(cue.Def("#component"))
	pathCtxRelease         = cue.MakePath(cue.Def("#moduleReleaseMetadata"))
	pathCtxComponent       = cue.MakePath(cue.Def("#componentMetadata"))
	pathCtxEnv             = cue.MakePath(cue.Def("#environmentMetadata"))
)

// contextData is what the engine gives every transformer as #context,
// as plain data that unifies with whichever #TransformerContext the
// transformer declares: the release metadata and, with an environment, its
// metadata for contexts that declare #environmentMetadata (plain), or the
// release metadata with the environment's labels and annotations folded in
// for those that do not (folded), so every provider's objects carry them.
func contextData(rc releaseContext) (plain, folded, env map[string]any, err error) {
	plain = map[string]any{
		"name": rc.release.name, "namespace": rc.release.namespace, "fqn": rc.release.fqn,
		"version": rc.release.version, "identity": rc.release.identity, "labels": rc.release.labels,
	}
	if len(rc.release.annotations) > 0 {
		plain["annotations"] = rc.release.annotations
	}
	if !rc.env.Exists() {
		return plain, plain, nil, nil
	}
	envName, _ := rc.env.LookupPath(cue.ParsePath("name")).String()
	envLabels, err := stringMap(rc.env.LookupPath(cue.ParsePath("labels")))
	if err != nil {
		return nil, nil, nil, err
	}
	envAnnotations, err := stringMap(rc.env.LookupPath(cue.ParsePath("annotations")))
	if err != nil {
		return nil, nil, nil, err
	}
	env = map[string]any{"name": envName}
	if len(envLabels) > 0 {
		env["labels"] = envLabels
	}
	if len(envAnnotations) > 0 {
		env["annotations"] = envAnnotations
	}
	labels := maps.Clone(rc.release.labels)
	annotations := maps.Clone(rc.release.annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	envLabels["environment.opmodel.dev/name"] = envName
	for _, add := range []struct {
		dst, src map[string]string
		what     string
	}{{labels, envLabels, "label"}, {annotations, envAnnotations, "annotation"}} {
		for k, v := range add.src {
			if old, ok := add.dst[k]; ok && old != v {
				return nil, nil, nil, fmt.Errorf("environment %q sets %s %s to %q, but the release has %q", envName, add.what, k, v, old)
			}
			add.dst[k] = v
		}
	}
	folded = maps.Clone(plain)
	folded["labels"] = labels
	if len(annotations) > 0 {
		folded["annotations"] = annotations
	}
	return plain, folded, env, nil
}

// renderComponents runs the transformers over every component. Inputs are
// built once per release and once per component and unified into each
// transformer in one step: every FillPath re-evaluates the value it fills,
// so filling piecewise into each transformer made rendering several times
// slower.
func renderComponents(cctx *cue.Context, comps cue.Value, rc releaseContext, transformers []transformer, catalog cue.Value, limit *Reach, where string) ([]manifest.Resource, error) {
	return renderComponentsChecked(cctx, comps, rc, transformers, catalog, limit, where, true, nil, nil)
}

// reuse returns the objects a component rendered to before, when they are
// what transforming it again would give (reusable); ok is false otherwise.
type reuse func(name string, cv cue.Value) (objs []manifest.Resource, ok bool)

// renderComponentsChecked renders as renderComponents does; without checks
// a spec field no definition declares is not looked for, a component
// reused gives (when not nil) is taken as it was, and only, when not nil,
// names the components rendered (a share of them, in their order).
func renderComponentsChecked(cctx *cue.Context, comps cue.Value, rc releaseContext, transformers []transformer, catalog cue.Value, limit *Reach, where string, checks bool, reused reuse, only []string) ([]manifest.Resource, error) {
	if opmv2.IsModule(comps) {
		// moduleComponents hands over an OPM v2 module whole: upstream's
		// runtime binds it to the release and renders it on the platform.
		return renderV2(cctx, comps, rc, limit, where)
	}
	// Which catalog definition declares a spec field only matters to
	// the message of a field not allowed: read the catalog for it then.
	owners := sync.OnceValue(func() map[string]string { return catalogOwners(catalog) })
	names := only
	if names == nil {
		var err error
		if names, err = load.FieldNames(comps); err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: reading components:\n%s", where, load.Describe(err)))
		}
	}
	plain, folded, envMeta, err := contextData(rc)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: %w", where, err))
	}
	empty := cctx.CompileString("{}")
	// #Transformer leaves output open (a disjunction in the schema costs
	// every transform a default to resolve): an output that is already a
	// struct is what the shape would leave it, and anything else is
	// unified with the shape here — the empty struct as default for a
	// comprehension that is not yet one — which is the same value
	// (unification does not depend on order).
	outputShape := cctx.CompileString("*{...} | [...{...}]")
	base := empty.FillPath(cue.MakePath(cue.Str("name")), rc.release.name).
		FillPath(cue.MakePath(cue.Str("namespace")), rc.release.namespace)
	// Index 0: contexts without #environmentMetadata; 1: with it.
	relCtx := [2]cue.Value{base.FillPath(pathCtxRelease, folded), base.FillPath(pathCtxRelease, plain)}
	if envMeta != nil {
		relCtx[1] = relCtx[1].FillPath(pathCtxEnv, envMeta)
	}
	contextSchema := catalog.LookupPath(pathTransformerContext)
	tc := newTransforms(rc.transforms, transformers, rc.release, plain, folded, envMeta, checks)
	var out []manifest.Resource
	type owner struct {
		component string
		t         transformer
	}
	seen := map[manifest.ID]owner{}
	for _, name := range names {
		compWhere := fmt.Sprintf("%s, component %q", where, name)
		cv := comps.LookupPath(cue.MakePath(cue.Str(name)))
		if reused != nil {
			if objs, ok := reused(name, cv); ok {
				for _, res := range objs {
					seen[res.ID()] = owner{component: name}
				}
				out = append(out, objs...)
				continue
			}
		}
		if checks {
			if problems := checkSpec(cv, owners, catalog); len(problems) > 0 {
				return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: the spec sets what its definitions do not declare:\n%s", compWhere, describeSpecProblems(name, problems)))
			}
		}
		if err := cv.Validate(cue.Concrete(true)); err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s is incomplete or invalid:\n%s", compWhere, describeComponent(err, comps)))
		}
		comp, err := readComponent(name, cv)
		if err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: %w", compWhere, err))
		}
		cm := map[string]any{"name": name}
		if len(comp.labels) > 0 {
			cm["labels"] = comp.labels
		}
		if len(comp.annotations) > 0 {
			cm["annotations"] = comp.annotations
		}
		// One small value carries both inputs; unifying it into each
		// transformer costs one evaluation instead of two FillPaths. The
		// catalog's context is evaluated here once for all the component's
		// transformers that share it: evaluated in each, its label
		// comprehensions were most of a ConfigMap's or Secret's render.
		var inputs [3]cue.Value
		input := func(t transformer) cue.Value {
			i := 0
			switch {
			case t.sharedContext:
				i = 2
			case t.envAware:
				i = 1
			}
			if !inputs[i].Exists() {
				data := relCtx[min(i, 1)].FillPath(pathCtxComponent, cm)
				if t.sharedContext {
					data = contextSchema.Unify(data)
				}
				inputs[i] = empty.FillPath(pathComponent, cv).FillPath(pathContext, data)
			}
			return inputs[i]
		}
		// accept adds what t rendered for the component, once checked.
		accept := func(res manifest.Resource, t transformer, i int) error {
			o, id := res.Object, res.ID()
			if missing := missingIdentity(o); missing != "" {
				return fault.Validationf("%s: transformer %s (declared at %s) renders an object (output %d) without %s; every output needs apiVersion, kind and metadata.name", compWhere, t, t.pos, i, missing)
			}
			if other, dup := seen[id]; dup {
				if other.component == name {
					return fault.Validationf("%s: transformers %s (declared at %s) and %s (declared at %s) both render %s; two transformers cannot claim the same output: remove one from the providers, or narrow its requiredResources/requiredTraits/requiredLabels", compWhere, other.t, other.t.pos, t, t.pos, id)
				}
				return fault.Validationf("%s: %s is also rendered by component %q; two components cannot produce the same object", compWhere, id, other.component)
			}
			if why := limit.Check(res, rc.release.namespace); why != "" {
				return fault.Validationf("%s: transformer %s (declared at %s) %s", compWhere, t, strings.TrimPrefix(t.pos.String(), load.EmbeddedRoot), why)
			}
			seen[id] = owner{name, t}
			out = append(out, res)
			return nil
		}
		// A component whose inputs are those of a transform the cache
		// holds is not transformed again (unless hits are verified).
		key := ""
		if tc != nil {
			if data, err := cv.MarshalJSON(); err == nil {
				key = tc.key(data, comp)
			}
		}
		var hit []transformed
		cached := false
		if key != "" {
			hit, cached = tc.get(key)
		}
		if cached && !tc.verify {
			if res, err := cachedResources(hit, name); err == nil {
				for i, r := range res {
					if err := accept(r, tc.byFQN[hit[i].Transformer], i); err != nil {
						return nil, err
					}
				}
				continue
			}
			cached = false // an entry that does not decode is a miss
		}
		rc.transforms.stats.transform()
		var matched []transformer
		var fresh []transformed
		rendersSecret := false
		for _, t := range transformers {
			if !t.matches(comp) {
				continue
			}
			matched = append(matched, t)
			tv := t.value.Unify(input(t))
			objs, raws, err := outputs(shaped(tv.LookupPath(cue.ParsePath("output")), outputShape))
			if err != nil {
				return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s, transformer %s:\n%s", compWhere, t, describeOutput(err, cv)))
			}
			for i, o := range objs {
				res := manifest.Resource{Object: o, Component: name}
				if err := accept(res, t, i); err != nil {
					return nil, err
				}
				fresh = append(fresh, transformed{Transformer: t.fqn, Object: raws[i]})
				rendersSecret = rendersSecret || res.ID().IsSecret()
			}
		}
		if err := checkMatched(comp, matched, transformers, compWhere); err != nil {
			return nil, err
		}
		switch {
		case cached && !same(hit, fresh):
			return nil, fmt.Errorf("%s: the transform cache's entry %s differs from the transform (verified because OPM_VERIFY_SKIPS is set): this is a bug in opm; OPM_CACHE_DIR=off renders without the cache", compWhere, key)
		case key != "" && !cached && !rendersSecret: // no Secret data on disk
			if tc.put(key, fresh) {
				rc.transforms.stats.wrote(key)
			}
		}
	}
	return out, nil
}

// missingIdentity names the identifying fields o lacks, or is "".
func missingIdentity(o *unstructured.Unstructured) string {
	var m []string
	if o.GetAPIVersion() == "" {
		m = append(m, "apiVersion")
	}
	if o.GetKind() == "" {
		m = append(m, "kind")
	}
	if o.GetName() == "" {
		m = append(m, "metadata.name")
	}
	return strings.Join(m, ", ")
}

// checkMatched refuses a component no transformer renders, and a trait no
// matching transformer handles: either would silently drop what the author
// asked for.
func checkMatched(c component, matched, all []transformer, where string) error {
	if len(matched) == 0 {
		providers := map[string]bool{}
		for _, t := range all {
			providers[t.provider] = true
		}
		return fault.Validationf("%s matches no transformer of provider(s) %s (at %s): it has resources [%s], traits [%s] and labels %s; a transformer matches when the component has all of its required resources, traits and labels",
			where, strings.Join(slices.Sorted(maps.Keys(providers)), ", "), authorPos(c.value), strings.Join(c.resources, ", "), strings.Join(c.traits, ", "), formatLabels(c.labels))
	}
	for _, tr := range c.traits {
		if !slices.ContainsFunc(matched, func(t transformer) bool { return t.handles(tr) }) {
			var names []string
			for _, t := range matched {
				names = append(names, t.fqn)
			}
			return fault.Validationf("%s (at %s) has trait %s, but none of the transformers that render it (%s) handles it; use a provider with a transformer that requires or accepts it, or remove the trait", where, authorPos(c.value), tr, strings.Join(names, ", "))
		}
	}
	return nil
}

// authorPos is the first position of v, or of a value below it, in the
// author's files rather than in the embedded catalog: that is where a
// component can be fixed.
func authorPos(v cue.Value) token.Pos {
	queue := []cue.Value{v}
	for seen := 0; len(queue) > 0 && seen < 64; seen++ {
		x := queue[0]
		queue = queue[1:]
		if p := x.Pos(); p.IsValid() && p.Filename() != "" && !strings.HasPrefix(p.Filename(), load.EmbeddedRoot) {
			return p
		}
		if it, err := x.Fields(); err == nil {
			for it.Next() {
				queue = append(queue, it.Value())
			}
		}
	}
	return v.Pos()
}

func formatLabels(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return "{" + strings.Join(kv, ", ") + "}"
}

// shaped is a transformer's output as the output shape makes it: a
// struct as it is (unifying a whole object again costs more than the
// disjunction saved), anything else unified with shape; an output that
// does not exist stays absent.
func shaped(v, shape cue.Value) cue.Value {
	if !v.Exists() || v.Kind() == cue.StructKind {
		return v
	}
	return v.Unify(shape)
}

// outputs decodes a transformer's output: one object (a struct with
// apiVersion), or several — a list, or a map of objects keyed by name, as
// transformers of components annotated transformer.opmodel.dev/list-output
// produce — each with its JSON as encoded (what the transform cache keeps).
func outputs(v cue.Value) ([]*unstructured.Unstructured, [][]byte, error) {
	if !v.Exists() {
		return nil, nil, nil
	}
	if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, nil, err
	}
	var items []cue.Value
	switch {
	case v.Kind() == cue.ListKind:
		it, err := v.List()
		if err != nil {
			return nil, nil, err
		}
		for it.Next() {
			items = append(items, it.Value())
		}
	case v.LookupPath(cue.ParsePath("apiVersion")).Exists():
		items = append(items, v)
	default:
		it, err := v.Fields()
		if err != nil {
			return nil, nil, err
		}
		for it.Next() {
			items = append(items, it.Value())
		}
	}
	objs := make([]*unstructured.Unstructured, 0, len(items))
	raws := make([][]byte, 0, len(items))
	for _, item := range items {
		b, err := item.MarshalJSON()
		if err != nil {
			return nil, nil, err
		}
		u, err := objectOf(b)
		if err != nil {
			return nil, nil, err
		}
		objs, raws = append(objs, u), append(raws, b)
	}
	return objs, raws, nil
}

// objectOf decodes one rendered object.
func objectOf(b []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		// unstructured's decoder refuses an object without kind; keep it
		// as a plain map so the caller can say which transformer rendered
		// it.
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			return nil, err
		}
		u.Object = m
	}
	return u, nil
}

// anyStringMap decodes labels or annotations whose values OPM allows to be
// strings, numbers or booleans (transformer.opmodel.dev/list-output: true),
// rendering each value as a string.
func anyStringMap(v cue.Value) (map[string]string, error) {
	out := map[string]string{}
	if !v.Exists() {
		return out, nil
	}
	var raw map[string]any
	if err := v.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decoding %v: %s", v.Path(), load.Describe(err))
	}
	for k, x := range raw {
		out[k] = fmt.Sprint(x)
	}
	return out, nil
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

// authorPosAt is the author's position of the deepest value that exists
// along sub below root: where the value a schema error is about was set,
// when CUE only reports the schema's own position.
func authorPosAt(root cue.Value, sub []string) token.Pos {
	sels, ok := selectorsOf(sub)
	if !ok {
		return token.NoPos
	}
	for n := len(sels); n > 0; n-- {
		v := root.LookupPath(cue.MakePath(sels[:n]...))
		if !v.Exists() {
			continue
		}
		if p := authorPos(v); p.IsValid() && !strings.HasPrefix(p.Filename(), load.EmbeddedRoot) {
			return p
		}
	}
	return token.NoPos
}

// selectorsOf turns an error's path labels into selectors; ok is false
// for a hidden label, which no lookup reaches.
func selectorsOf(sub []string) (sels []cue.Selector, ok bool) {
	for _, s := range sub {
		switch {
		case strings.HasPrefix(s, "#"):
			sels = append(sels, cue.Def(s))
		case strings.HasPrefix(s, "_"):
			return nil, false
		case strings.HasPrefix(s, `"`):
			u, err := strconv.Unquote(s)
			if err != nil {
				return nil, false
			}
			sels = append(sels, cue.Str(u))
		default:
			if n, err := strconv.Atoi(s); err == nil {
				sels = append(sels, cue.Index(n))
			} else {
				sels = append(sels, cue.Str(s))
			}
		}
	}
	return sels, true
}

// describeComponent describes an error about a component's value, adding
// where the author set the offending value, and a field the author set
// beside a missing required one that looks like its misspelling (`tpye`
// for `type`: an open struct takes the typo without a word).
func describeComponent(err error, comps cue.Value) string {
	text := load.DescribeWith(err, func(path []string, _ []token.Pos) (string, []token.Pos) {
		i := slices.Index(path, "#components")
		if i < 0 {
			return "", nil
		}
		return strings.Join(path, "."), []token.Pos{authorPosAt(comps, path[i+1:])}
	})
	hinted := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		if !strings.HasPrefix(format, "required field missing: %") || len(args) != 1 {
			continue
		}
		missing := fmt.Sprint(args[0])
		path := e.Path()
		i := slices.Index(path, "#components")
		if i < 0 {
			continue
		}
		sels, ok := selectorsOf(path[i+1:])
		if !ok {
			continue
		}
		v := comps.LookupPath(cue.MakePath(sels...))
		fields, _ := load.FieldNames(v)
		for _, f := range fields {
			if f == missing || hinted[f] || !slices.Contains(suggest.Closest(f, []string{missing}), missing) {
				continue
			}
			hinted[f] = true
			at := ""
			if p := authorPos(v.LookupPath(cue.MakePath(cue.Str(f)))); p.IsValid() {
				at = " (" + p.String() + ")"
			}
			text += fmt.Sprintf("\n  hint: %s sets %q%s, which is not a field it declares: did you mean %q?", strings.Join(path, "."), f, at, missing)
		}
	}
	return text
}

// describeOutput describes an error in a transformer's output. The output
// is declared as one object or a list of objects; the alternative that did
// not apply only adds noise ("mismatched types struct and list"), so it is
// dropped, and paths start at output.
func describeOutput(err error, comp cue.Value) string {
	var kept cueerrors.Error
	for _, e := range cueerrors.Errors(err) {
		msg := e.Error()
		if strings.Contains(msg, "mismatched types struct and list") || strings.Contains(msg, "mismatched types list and struct") ||
			strings.Contains(msg, "errors in empty disjunction") {
			continue
		}
		kept = cueerrors.Append(kept, e)
	}
	if kept == nil {
		return load.Describe(err)
	}
	where := authorPos(comp)
	return load.DescribeWith(kept, func(path []string, pos []token.Pos) (string, []token.Pos) {
		if i := slices.Index(path, "#documents"); i >= 0 && i+2 < len(path) {
			// The file is in the path; the component's own position
			// would be the catalog's.
			return describeDocument(path[i+1:], pos), nil
		}
		i := slices.Index(path, "output")
		if i < 0 {
			return "", nil
		}
		return strings.Join(path[i:], "."), []token.Pos{where}
	})
}

// describeDocument names a problem in a Manifests component's YAML file
// (the path below the transformer's #documents: file, document index,
// field): the file, with the line and column in it where CUE knows them,
// the document's place, and the field.
func describeDocument(path []string, pos []token.Pos) string {
	file := path[0]
	if f, err := strconv.Unquote(file); err == nil {
		file = f
	}
	for _, p := range pos {
		if p.IsValid() && p.Filename() == "" {
			file = fmt.Sprintf("%s:%d:%d", file, p.Line(), p.Column())
			break
		}
	}
	doc := path[1]
	if n, err := strconv.Atoi(doc); err == nil {
		doc = strconv.Itoa(n + 1)
	}
	return fmt.Sprintf("%s (document %s of the file): %s", file, doc, strings.Join(path[2:], "."))
}
