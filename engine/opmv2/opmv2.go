// Package opmv2 renders modules of OPM's v2 line (opmodel.dev/core@v2) the
// way upstream's runtime does (open-platform-model/library, opm/compile and
// opm/materialize): an instance binds a #Module to a name, a namespace and
// values; each component is matched to the transformers of the platform's
// subscribed catalogs through the FQNs of its resources and traits; each
// matched transformer's #transform is filled with the component (as data)
// and a #context, and its output is one object or a list.
//
// What differs from upstream is only what the caller asks for through the
// instance: extra labels (a release's identity and environment) and the
// runtime name that becomes app.kubernetes.io/managed-by.
package opmv2

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"

	"github.com/opmodel/pipeline/engine/load"
)

// Paths into core@v2 values.
var (
	pathTransformers       = cue.MakePath(cue.Def("transformers"))
	pathRequiredResources  = cue.ParsePath("requiredResources")
	pathOptionalResources  = cue.ParsePath("optionalResources")
	pathRequiredTraits     = cue.ParsePath("requiredTraits")
	pathOptionalTraits     = cue.ParsePath("optionalTraits")
	pathRequiredLabels     = cue.ParsePath("requiredLabels")
	pathTransform          = cue.MakePath(cue.Def("transform"))
	pathComponent          = cue.MakePath(cue.Def("component"))
	pathContext            = cue.MakePath(cue.Def("context"))
	pathOutput             = cue.ParsePath("output")
	pathResources          = cue.MakePath(cue.Def("resources"))
	pathTraits             = cue.MakePath(cue.Def("traits"))
	pathInstanceComponents = cue.ParsePath("components")
	pathMatchLabels        = cue.ParsePath("matchLabels")
)

// IsModule reports whether v is a core@v2 #Module: kind "Module" and a
// metadata.modulePath (the older line has metadata.apiVersion instead).
func IsModule(v cue.Value) bool {
	k, err := v.LookupPath(cue.ParsePath("kind")).String()
	if err != nil || k != "Module" {
		return false
	}
	return v.LookupPath(cue.ParsePath("metadata.modulePath")).Exists()
}

// Platform is the transformers of a platform's subscribed catalogs, indexed
// as upstream's materializer indexes them: by the FQN of every resource
// (required or optional) and trait (required or optional) they use.
type Platform struct {
	transformers map[string]cue.Value
	byResource   map[string][]string
	byTrait      map[string][]string
}

// Catalog is one subscribed catalog: its module path and version, and its
// root value (a core@v2 #Catalog with #transformers).
type Catalog struct {
	Path, Version string
	Value         cue.Value
}

// NewPlatform indexes the catalogs' transformers. A transformer that two
// catalogs both carry must agree (upstream unifies them).
func NewPlatform(catalogs []Catalog) (*Platform, error) {
	p := &Platform{transformers: map[string]cue.Value{}, byResource: map[string][]string{}, byTrait: map[string][]string{}}
	for _, c := range catalogs {
		txs := c.Value.LookupPath(pathTransformers)
		if !txs.Exists() {
			return nil, fmt.Errorf("catalog %s@%s has no #transformers: is it a core@v2 #Catalog?", c.Path, c.Version)
		}
		it, err := txs.Fields()
		if err != nil {
			return nil, fmt.Errorf("catalog %s@%s: reading #transformers: %w", c.Path, c.Version, err)
		}
		for it.Next() {
			fqn := it.Selector().Unquoted()
			tx := it.Value()
			if prev, ok := p.transformers[fqn]; ok {
				tx = prev.Unify(tx)
				if err := tx.Validate(cue.Concrete(false)); err != nil {
					return nil, fmt.Errorf("transformer %s differs between the subscribed catalogs: %w", fqn, err)
				}
			}
			p.transformers[fqn] = tx
		}
	}
	for _, fqn := range sortedKeys(p.transformers) {
		tx := p.transformers[fqn]
		for _, path := range []cue.Path{pathRequiredResources, pathOptionalResources} {
			for _, r := range keys(tx.LookupPath(path)) {
				p.byResource[r] = appendNew(p.byResource[r], fqn)
			}
		}
		for _, path := range []cue.Path{pathRequiredTraits, pathOptionalTraits} {
			for _, r := range keys(tx.LookupPath(path)) {
				p.byTrait[r] = appendNew(p.byTrait[r], fqn)
			}
		}
	}
	return p, nil
}

// Instance is a module bound to a name, a namespace and values.
type Instance struct {
	Name, Namespace string
	// Module is the core@v2 #Module value.
	Module cue.Value
	// Values are the effective values (the instance's values).
	Values cue.Value
	// Definition is core@v2's #ModuleInstance, of the core the module was
	// written with: it binds the module (re-checking it against #Module,
	// which settles what a component's schema leaves open: a list item's
	// disjunct with a missing required field) and derives the instance's
	// fqn, uuid and labels. The module comes unfilled and Values beside
	// it: a module filled before the binding is evaluated once more.
	Definition cue.Value
	// Labels are added to the instance's labels (upstream: the module's
	// labels and module-instance.opmodel.dev/{name,uuid}), which every
	// transformer writes on its objects.
	Labels map[string]string
	// RuntimeName is #context.#runtimeName: the objects'
	// app.kubernetes.io/managed-by.
	RuntimeName string
}

// Error is a failure of a render: where (the binding, a component, a
// transformer) and CUE's error, whose positions name the user's files.
type Error struct {
	Where string
	Err   error
}

func (e *Error) Error() string { return e.Where + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Object is one rendered object, as JSON, and where it came from. Plain
// data, not a cue.Value: a value would keep its transformer's whole
// evaluation alive until the render ends (about 10 MB a component with
// upstream's catalog).
type Object struct {
	Component, Transformer string
	JSON                   []byte
}

// Result is a render of one instance.
type Result struct {
	Objects []Object
	// Warnings are upstream's advisories (an optional trait no matched
	// transformer handles).
	Warnings []string
	// Matches are the transformers each component was paired with.
	Matches map[string][]string
}

// moduleMeta is what the instance reads of the module's metadata.
type moduleMeta struct {
	name, modulePath, version, fqn string
	labels, annotations            map[string]string
}

func readModule(m cue.Value) (moduleMeta, error) {
	var mm moduleMeta
	for _, f := range []struct {
		dst  *string
		path string
	}{{&mm.name, "name"}, {&mm.modulePath, "modulePath"}, {&mm.version, "version"}, {&mm.fqn, "fqn"}} {
		v := m.LookupPath(cue.ParsePath("metadata." + f.path))
		if d, ok := v.Default(); ok {
			v = d
		}
		s, err := v.String()
		if err != nil {
			return mm, fmt.Errorf("module metadata.%s is not a concrete string (upstream's loader requires it): %w", f.path, err)
		}
		*f.dst = s
	}
	var err error
	if mm.labels, err = stringMap(m.LookupPath(cue.ParsePath("metadata.labels"))); err != nil {
		return mm, fmt.Errorf("module metadata.labels: %w", err)
	}
	if mm.annotations, err = stringMap(m.LookupPath(cue.ParsePath("metadata.annotations"))); err != nil {
		return mm, fmt.Errorf("module metadata.annotations: %w", err)
	}
	return mm, nil
}

// Render renders inst on p, as upstream's compile does: match every
// component, refuse unresolved demands and unmatched components, then run
// each matched transformer.
func Render(cctx *cue.Context, p *Platform, inst Instance) (*Result, error) {
	mm, err := readModule(inst.Module)
	if err != nil {
		return nil, err
	}
	if !inst.Definition.Exists() {
		return nil, fmt.Errorf("no #ModuleInstance definition of core@v2 to bind the module with")
	}
	// One unification of the definition with every argument: filling
	// them one by one re-evaluates the module each time.
	args := cctx.CompileString("{}").
		FillPath(cue.ParsePath("metadata.name"), inst.Name).
		FillPath(cue.ParsePath("metadata.namespace"), inst.Namespace).
		FillPath(cue.MakePath(cue.Def("module")), inst.Module).
		FillPath(cue.ParsePath("values"), inst.Values)
	bound := inst.Definition.Unify(args)
	if err := bound.LookupPath(cue.ParsePath("metadata")).Validate(cue.Concrete(true)); err != nil {
		return nil, &Error{Where: fmt.Sprintf("binding the module as instance %q in %q", inst.Name, inst.Namespace), Err: err}
	}
	comps := bound.LookupPath(pathInstanceComponents)
	// Not concrete: a field no transformer reads may stay open (a secret's
	// `from` choice); what a transformer outputs is checked there.
	if err := comps.Validate(); err != nil {
		return nil, &Error{Where: "evaluating the module's #components with the instance's values", Err: err}
	}
	var meta struct {
		FQN    string            `json:"fqn"`
		UUID   string            `json:"uuid"`
		Labels map[string]string `json:"labels"`
	}
	if err := bound.LookupPath(cue.ParsePath("metadata")).Decode(&meta); err != nil {
		return nil, fmt.Errorf("reading the instance's metadata: %w", err)
	}
	labels := meta.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range inst.Labels {
		labels[k] = v
	}
	instMeta := map[string]any{"name": inst.Name, "namespace": inst.Namespace, "fqn": meta.FQN, "version": mm.version, "uuid": meta.UUID, "labels": labels}
	if len(mm.annotations) > 0 {
		instMeta["annotations"] = mm.annotations
	}

	names, err := load.FieldNames(comps)
	if err != nil {
		return nil, fmt.Errorf("reading #components: %w", err)
	}
	res := &Result{Matches: map[string][]string{}}
	var problems []string
	for _, name := range names {
		comp := comps.LookupPath(cue.MakePath(cue.Str(name)))
		matched, warnings, unresolved := p.match(name, comp)
		res.Warnings = append(res.Warnings, warnings...)
		problems = append(problems, unresolved...)
		if len(matched) == 0 && len(unresolved) == 0 {
			problems = append(problems, fmt.Sprintf("component %q: no transformer of the platform matches it", name))
		}
		res.Matches[name] = matched
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("the platform's catalogs cannot render every component:\n  %s", strings.Join(problems, "\n  "))
	}
	for _, name := range names {
		comp := comps.LookupPath(cue.MakePath(cue.Str(name)))
		data, err := finalize(cctx, comp)
		if err != nil {
			return nil, &Error{Where: fmt.Sprintf("component %q", name), Err: err}
		}
		cm := map[string]any{"name": name}
		if l, err := stringMap(comp.LookupPath(cue.ParsePath("metadata.labels"))); err == nil && len(l) > 0 {
			cm["labels"] = l
		}
		if a, err := stringMap(comp.LookupPath(cue.ParsePath("metadata.annotations"))); err == nil && len(a) > 0 {
			cm["annotations"] = a
		}
		context := cctx.CompileString("{}").
			FillPath(cue.MakePath(cue.Def("moduleInstanceMetadata")), cctx.Encode(instMeta)).
			FillPath(cue.MakePath(cue.Def("componentMetadata")), cctx.Encode(cm)).
			FillPath(cue.MakePath(cue.Def("runtimeName")), cctx.Encode(inst.RuntimeName))
		for _, tfFQN := range res.Matches[name] {
			objs, err := execute(cctx, p.transformers[tfFQN], data, context)
			if err != nil {
				return nil, &Error{Where: fmt.Sprintf("component %q, transformer %s", name, tfFQN), Err: err}
			}
			for _, o := range objs {
				b, err := o.MarshalJSON()
				if err != nil {
					return nil, &Error{Where: fmt.Sprintf("component %q, transformer %s", name, tfFQN), Err: err}
				}
				res.Objects = append(res.Objects, Object{Component: name, Transformer: tfFQN, JSON: b})
			}
		}
	}
	return res, nil
}

// match pairs a component with the transformers that handle it:
// candidates from the index of each of its resources' and traits' FQNs,
// kept when the component's primitives unify with what the transformer
// requires and its requiredLabels ⊆ the component's matchLabels (never
// metadata.labels), requiredResources ⊆ its resources, requiredTraits ⊆
// its traits. Every resource must be handled; an unhandled trait is an
// error unless the component marks it optional.
func (p *Platform) match(name string, comp cue.Value) (matched, warnings, unresolved []string) {
	labels, _ := stringMap(comp.LookupPath(pathMatchLabels))
	resources := keys(comp.LookupPath(pathResources))
	traits := keys(comp.LookupPath(pathTraits))
	unifies := map[string]bool{}
	ok := func(tfFQN string) bool {
		if v, seen := unifies[tfFQN]; seen {
			return v
		}
		tx := p.transformers[tfFQN]
		// The cheap rungs first: a unification evaluates both schemas.
		v := subset(keys(tx.LookupPath(pathRequiredResources)), resources) &&
			subset(keys(tx.LookupPath(pathRequiredTraits)), traits) &&
			labelsSubset(tx.LookupPath(pathRequiredLabels), labels)
		v = v && unifyOK(comp.LookupPath(pathResources), tx.LookupPath(pathRequiredResources)) &&
			unifyOK(comp.LookupPath(pathTraits), tx.LookupPath(pathRequiredTraits))
		unifies[tfFQN] = v
		return v
	}
	handledTraits := map[string]bool{}
	for _, r := range resources {
		handled := false
		for _, tfFQN := range p.byResource[r] {
			if ok(tfFQN) {
				handled = true
				matched = appendNew(matched, tfFQN)
			}
		}
		if !handled {
			unresolved = append(unresolved, fmt.Sprintf("component %q: no transformer of the platform handles resource %s%s", name, r, alternatives(p.byResource, r)))
		}
	}
	for _, t := range traits {
		for _, tfFQN := range p.byTrait[t] {
			if ok(tfFQN) {
				handledTraits[t] = true
				matched = appendNew(matched, tfFQN)
			}
		}
	}
	for _, tfFQN := range matched {
		for _, t := range keys(p.transformers[tfFQN].LookupPath(pathOptionalTraits)) {
			handledTraits[t] = true
		}
	}
	for _, t := range traits {
		if handledTraits[t] {
			continue
		}
		optional, _ := comp.LookupPath(cue.MakePath(cue.Def("traits"), cue.Str(t), cue.Str("optional"))).Default()
		if b, err := optional.Bool(); err == nil && b {
			warnings = append(warnings, fmt.Sprintf("component %q: no matched transformer handles optional trait %s", name, t))
			continue
		}
		unresolved = append(unresolved, fmt.Sprintf("component %q: no transformer of the platform handles trait %s (mark it optional if the component works without it)%s", name, t, alternatives(p.byTrait, t)))
	}
	sort.Strings(matched)
	return matched, warnings, unresolved
}

// alternatives names other versions of a missing FQN the platform has.
func alternatives(index map[string][]string, fqn string) string {
	base, _, _ := strings.Cut(fqn, "@")
	var alts []string
	for k := range index {
		if b, _, _ := strings.Cut(k, "@"); b == base && k != fqn {
			alts = append(alts, k)
		}
	}
	if len(alts) == 0 {
		return ""
	}
	slices.Sort(alts)
	return "; the platform has " + strings.Join(alts, ", ")
}

// unifyOK checks each primitive both sides name unifies (upstream's
// "always-unify" rung), ignoring provenance fields.
func unifyOK(have, required cue.Value) bool {
	if !required.Exists() || !have.Exists() {
		return true
	}
	it, err := required.Fields(cue.Optional(true))
	if err != nil {
		return true
	}
	for it.Next() {
		cv := have.LookupPath(cue.MakePath(cue.Str(it.Selector().Unquoted())))
		if !cv.Exists() {
			continue
		}
		if err := cv.Unify(it.Value()).Validate(cue.Concrete(false)); err != nil && !onlyProvenance(err) {
			return false
		}
	}
	return true
}

func subset(want, have []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func labelsSubset(required cue.Value, have map[string]string) bool {
	want, err := stringMap(required)
	if err != nil {
		return false
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// finalize is the component as plain data: concrete, defaults taken,
// definitions and hidden fields dropped (upstream's FinalizeValue).
func finalize(cctx *cue.Context, v cue.Value) (cue.Value, error) {
	n := v.Syntax(cue.Final())
	expr, ok := n.(ast.Expr)
	if !ok {
		return cue.Value{}, fmt.Errorf("finalizing gave %T, not an expression", n)
	}
	d := cctx.BuildExpr(expr)
	if err := d.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("finalizing: %w", err)
	}
	return d, nil
}

// execute fills a transformer's #transform and returns its output objects.
func execute(cctx *cue.Context, tx, component, context cue.Value) ([]cue.Value, error) {
	t := tx.LookupPath(pathTransform)
	if !t.Exists() {
		return nil, fmt.Errorf("the transformer has no #transform")
	}
	// One unification: each FillPath into the transformer evaluates it.
	// One unification: each FillPath into the transformer evaluates it.
	args := cctx.CompileString("{}").FillPath(pathComponent, component).FillPath(pathContext, context)
	out := t.Unify(args).LookupPath(pathOutput)
	if !out.Exists() {
		return nil, nil
	}
	if err := out.Validate(cue.Concrete(true)); err != nil {
		return nil, err
	}
	switch out.Kind() {
	case cue.StructKind:
		return []cue.Value{out}, nil
	case cue.ListKind:
		it, err := out.List()
		if err != nil {
			return nil, err
		}
		var objs []cue.Value
		for it.Next() {
			objs = append(objs, it.Value())
		}
		return objs, nil
	}
	return nil, fmt.Errorf("output is %s: a transformer returns one object (a struct) or a list of them", out.Kind())
}
