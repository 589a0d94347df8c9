package render

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue"
	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/opmv2"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/engine/values"
)

// moduleComponents fills the module's #config with the effective values
// and returns its #components.
func moduleComponents(rel, effective cue.Value, where, modulePath string) (cue.Value, error) {
	if module := rel.LookupPath(pathModule); opmv2.IsModule(module) {
		// An OPM v2 module renders whole (renderV2), with the values and
		// the instance's identity filled in at once: each fill evaluates
		// every component again.
		if !declaredByUser(module.LookupPath(pathComponents)) {
			return cue.Value{}, fault.Validationf("%s: module %q declares no #components, so it would render nothing", where, modulePath)
		}
		return module, nil
	}
	module := rel.LookupPath(pathModule).FillPath(pathConfig, effective)
	// A module that never declares #components is a mistake; one that
	// declares `#components: {}` empties its releases on purpose (apply
	// refuses that without --force).
	comps := module.LookupPath(pathComponents)
	if !declaredByUser(comps) {
		name, _ := module.LookupPath(cue.ParsePath("metadata.name")).String()
		return cue.Value{}, fault.Validationf("%s: module %q (%s) declares no #components, so it would render nothing; add one, e.g.\n"+
			"      #components: web: {\n"+
			"      \tcore.#Workload\n"+
			"      \tspec: workload: {type: \"stateless\", container: image: \"nginx:1.27\"}\n"+
			"      }", where, name, modulePath)
	}
	return comps, nil
}

// variant renders the release again from set (the values as merged, some
// replaced) and returns its effective values and objects as plain data.
type variant func(set *values.Set) (any, []map[string]any, error)

// variantOf renders the release's variants: as the release, without the
// spec checks the real render already passed (a stand-in of a value's
// shape declares no other field), which are a tenth of a render, and
// reusing the real objects (resources) of the components same says the
// stand-ins do not reach; shared out as the real render's components were,
// when run is not nil.
func variantOf(ctx context.Context, d *load.Deployment, rel cue.Value, rc releaseContext, transformers []transformer, limit *Reach, where string, same reuse, run *shared, resources []manifest.Resource, cut bool, missed *atomic.Bool) variant {
	// The real values, against which a stand-in render's say which of
	// #config's fields the stand-ins moved.
	realDoc := sync.OnceValues(func() (any, error) {
		var doc any
		err := decodeJSON(rc.values, &doc)
		return doc, err
	})
	return func(set *values.Set) (any, []map[string]any, error) {
		data, err := set.JSON()
		if err != nil {
			return nil, nil, err
		}
		if opmv2.IsModule(rel.LookupPath(pathModule)) {
			if data, err = inAuthorOrder(data, valueLayers(rel)...); err != nil {
				return nil, nil, err
			}
		}
		merged := d.Context.CompileBytes(data, cue.Filename(load.SyntheticFile))
		effective := rel.LookupPath(pathModule).LookupPath(pathConfig).Unify(merged)
		if err := effective.Validate(cue.Concrete(true), cue.Final()); err != nil {
			return nil, nil, fmt.Errorf("the module's #config rejects a stand-in value of the secrets' shape")
		}
		var doc any
		if err := decodeJSON(effective, &doc); err != nil {
			return nil, nil, err
		}
		vrc := rc
		vrc.values, vrc.transforms.stats = effective, nil
		if run != nil {
			moved, known := movedFields(realDoc, doc)
			if objs, err := run.variant(ctx, d, data, moved, known, transformers, limit, where, resources); err == nil {
				return doc, objectsOf(objs), nil
			}
		}
		if cut {
			missed.Store(true)
			return nil, nil, errCut
		}
		comps, err := moduleComponents(rel, effective, where, "")
		if err != nil {
			return nil, nil, err
		}
		objs, err := renderComponentsChecked(d.Context, comps, vrc, transformers, d.Catalog, limit, where, false, same, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering with stand-in values failed")
		}
		return doc, objectsOf(objs), nil
	}
}

// standInVariants is how many independent stand-ins a release's secrets
// are traced with. A field is secret-derived when any of them changes it,
// so one a module computes to come out alike for a secret and a stand-in
// (a function keeping one bit of a character does, about 12 times in 25)
// stays unmasked only when it does so for all of them: (12/25)^3, about
// 1 in 9, instead of 1 in 2. Each costs a render of the components the
// secrets reach, paid only by releases with secrets from SOPS files or
// secret inputs: a value written in the repository that reaches a Secret
// is traced with one, its module's author can read it anyway.
const standInVariants = 3

// standIns renders the release with the values at some paths replaced by
// stand-ins, once per set of paths and variant: taint.Variant's when any
// value is from a secret source, else taint.ShapeVariant's (every value
// replaced is the repository's, which its module's author can read; a
// value moved to another of its shape then has the stand-in it had, and
// the component cache the stand-in render). When the trace needs
// exactly the paths one probe replaced (a value from the repository that
// reaches a Secret, no SOPS), the probe's render is the trace's, which
// halves what such a release pays for its secrets. The results are read,
// never changed, by their callers.
type standIns struct {
	set    *values.Set
	render variant
	done   map[string]standInRender
	// of is the stand-in variant n replaces a value with.
	of func(n int) func(any) any
}

type standInRender struct {
	doc  any
	objs []map[string]any
	err  error
}

func newStandIns(set *values.Set, render variant) *standIns {
	of := taint.ShapeVariant
	if set.HasSecrets() {
		of = taint.Variant
	}
	return &standIns{set: set, render: render, done: map[string]standInRender{}, of: of}
}

// with renders with the values at paths replaced by stand-in variant n.
func (s *standIns) with(paths [][]string, n int) (any, []map[string]any, error) {
	keys := make([]string, len(paths))
	for i, p := range paths {
		b, err := json.Marshal(p) // unambiguous whatever the labels hold
		if err != nil {
			return nil, nil, err
		}
		keys[i] = string(b)
	}
	slices.Sort(keys)
	key := fmt.Sprintf("%d:%s", n, strings.Join(slices.Compact(keys), ","))
	r, ok := s.done[key]
	if !ok {
		r.doc, r.objs, r.err = s.render(s.set.Replaced(paths, s.of(n)))
		s.done[key] = r
	}
	return r.doc, r.objs, r.err
}

// reachingSecrets returns the paths of values, set in the repository
// rather than from a secret source, that reach a Secret's data: a PIN
// written into the release and kept in a Secret is as secret as one from
// SOPS. Candidates are the values whose text a Secret's data holds; only
// one whose stand-in changes the Secret's data counts. A public value that
// merely equals the data is left alone, so the result says nothing about
// which public strings are secret.
//
// Every candidate is decided, however many there are (a bound once let a
// ninth value, a PIN after eight plain DSN parts, go untraced): candidates
// are replaced in groups, a group that leaves the Secrets as they are
// clears all its members in one render, and one that changes them is
// split in two — one render when no candidate reaches a Secret, about
// 2k·log(n/k) for k of n that do.
func reachingSecrets(set *values.Set, resources []manifest.Resource, render *standIns) [][]string {
	// Compared as sets of strings: the stand-in render may list its
	// objects in another order (a share's components as they come).
	secretData := slices.Sorted(slices.Values(secretStrings(resources)))
	if len(secretData) == 0 {
		return nil
	}
	paths, vals := set.Leaves()
	var candidates [][]string
	for i, p := range paths {
		if text := leafText(vals[i]); text != "" && heldBy(text, secretData) {
			candidates = append(candidates, p)
		}
	}
	var out [][]string
	var probe func(group [][]string)
	probe = func(group [][]string) {
		if len(group) == 0 {
			return
		}
		_, objs, err := render.with(group, 0)
		if err == nil && slices.Equal(slices.Sorted(slices.Values(secretStrings(resourcesOf(objs)))), secretData) {
			return // no member reaches a Secret
		}
		if len(group) == 1 {
			// Changed, or a stand-in the schema rejects: it cannot be
			// cleared.
			out = append(out, group[0])
			return
		}
		probe(group[:len(group)/2])
		probe(group[len(group)/2:])
	}
	probe(candidates)
	return out
}

func leafText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil, map[string]any, []any:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func heldBy(text string, data []string) bool {
	for _, d := range data {
		if d == text || (len(text) >= 4 && strings.Contains(d, text)) {
			return true
		}
	}
	return false
}

// secretStrings returns the values of every v1 Secret's data (decoded) and
// stringData, in order.
func secretStrings(resources []manifest.Resource) []string {
	var out []string
	for _, r := range resources {
		if r.Object.GetKind() != "Secret" || r.Object.GetAPIVersion() != "v1" {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m, _ := r.Object.Object[field].(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(m)) {
				s, _ := m[k].(string)
				if field == "data" {
					if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
						s = string(dec)
					}
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func resourcesOf(objs []map[string]any) []manifest.Resource {
	out := make([]manifest.Resource, len(objs))
	for i, o := range objs {
		out[i] = manifest.Resource{Object: &unstructured.Unstructured{Object: o}}
	}
	return out
}

// traceSecrets renders the release again with the value at every one of
// paths (those from a secret source, and those that reach a Secret)
// replaced by each of variants stand-ins (engine/taint), and
// returns the fields of the effective values and of each object (same
// order as resources) that differ in any of them: the fields that carry
// a secret, whatever function derived them. When a stand-in render fails
// (a schema that admits nothing but the real value), the whole values and every field of every object but its kind
// are returned, with the error: nothing is shown that might carry a
// secret.
func traceSecrets(paths [][]string, variants int, effective cue.Value, resources []manifest.Resource, render *standIns) ([]taint.Field, [][]taint.Field, error) {
	real := objectsOf(resources)
	everything := func(err error) ([]taint.Field, [][]taint.Field, error) {
		return []taint.Field{{}}, taint.Objects(real, nil), err
	}
	var realDoc any
	if err := decodeJSON(effective, &realDoc); err != nil {
		return everything(err)
	}
	var valueFields []taint.Field
	objectFields := make([][]taint.Field, len(real))
	for n := range variants {
		sentinelDoc, other, err := render.with(paths, n)
		if err != nil {
			// A schema that admits one stand-in and not another leaves
			// the trace incomplete: nothing is shown.
			return everything(err)
		}
		if i, field := typeFromSecret(real, other); i >= 0 {
			return nil, nil, &typeError{index: i, field: field}
		}
		valueFields = taint.Union(valueFields, taint.Compare(realDoc, sentinelDoc))
		for i, f := range taint.Objects(real, other) {
			objectFields[i] = taint.Union(objectFields[i], f)
		}
	}
	return valueFields, objectFields, nil
}

// typeError: a secret reaches an object's kind or apiVersion.
type typeError struct {
	index int
	field string
}

func (e *typeError) Error() string {
	return fmt.Sprintf("the %s of the release's object number %d (in apply order) is derived from a secret value", e.field, e.index+1)
}

// typeFromSecret compares the kinds and apiVersions of the real objects
// with those of the render with stand-ins: the index of the first real
// object whose type the stand-ins changed, and which field; -1 when none.
func typeFromSecret(real, other []map[string]any) (int, string) {
	count := func(objs []map[string]any, key func(map[string]any) string) map[string]int {
		n := map[string]int{}
		for _, o := range objs {
			n[key(o)]++
		}
		return n
	}
	for _, field := range []string{"kind", "apiVersion"} {
		key := func(o map[string]any) string { return fmt.Sprint(o[field]) }
		left := count(other, key)
		for i, o := range real {
			if left[key(o)] == 0 {
				return i, field
			}
			left[key(o)]--
		}
	}
	return -1, ""
}

func decodeJSON(v cue.Value, out *any) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func objectsOf(rs []manifest.Resource) []map[string]any {
	out := make([]map[string]any, len(rs))
	for i, r := range rs {
		out[i] = r.Object.Object
	}
	return out
}

// derivedSecrets adds to secrets the text of every field a secret reaches,
// so free text (an error, a log line) is redacted of derived values too.
func derivedSecrets(secrets []string, resources []manifest.Resource, fields [][]taint.Field) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(secrets))
	for _, s := range secrets {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for i, fs := range fields {
		for _, s := range taint.Leaves(resources[i].Object.Object, fs) {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	// Longest first, so a fragment never hides a longer value.
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// secretKey is the stand-in for a map key that carries a secret. It is
// the same for every such key: anything derived from the key (a hash, a
// rank) would let a reader confirm guesses of the secret, and the value
// under it is masked anyway.
func secretKey(string) string { return redact.Mark }

// valueLabels are the labels of a #config error path below #config,
// unquoted ("spring.datasource.password" is one label).
func valueLabels(path []string, from int) []string {
	out := make([]string, 0, len(path)-from)
	for _, l := range path[from:] {
		if strings.HasPrefix(l, `"`) {
			if u, err := strconv.Unquote(l); err == nil {
				l = u
			}
		}
		out = append(out, l)
	}
	return out
}

// register tells the context's redactor (engine/redact) what of r must not
// be published: its identifiers when they depend on secret data, its
// secrets and what they derive into, a Secret's values, and the names of
// objects a secret reaches.
func register(ctx context.Context, r *Release) {
	red := redact.From(ctx)
	if red == nil || r == nil || !r.Sensitive() {
		return
	}
	red.Sensitive(r.ManifestDigest, r.ChangeID)
	red.Secrets(r.Secrets...)
	for i, res := range r.Resources {
		if i < len(r.SecretFields) && taint.NameTainted(r.SecretFields[i]) {
			red.Name(res.Object.GetName())
		}
		if res.Object.GetKind() != "Secret" || res.Object.GetAPIVersion() != "v1" {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m, _ := res.Object.Object[field].(map[string]any)
			for _, v := range m {
				s, _ := v.(string)
				red.Secrets(s)
				if field == "data" {
					if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
						red.Secrets(string(dec))
					}
				}
			}
		}
	}
}

// quotesNoValue marks an error of opm's own whose text names no value,
// only the release and where: it needs no stand-in to be shown.
type quotesNoValue struct{ error }

func (e quotesNoValue) Unwrap() error { return e.error }

// errorToken splits an error's text into quoted strings, runs of other
// non-space characters, and the spaces between them.
var errorToken = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\s+|[^\s"]+`)

// redactDerived masks in msg, the error of a render that holds secrets,
// every token the same render with stand-ins (standIn, its error) does not
// produce: what differs between the two derives from a secret, whatever
// function derived it, and nothing else does, so a public value stays (no
// oracle). When the stand-in render does not fail there is nothing to set
// against: every quoted string, every number and every label of a path
// that is not made of letters is masked.
func redactDerived(msg, standIn string) string {
	real := errorToken.FindAllString(msg, -1)
	keep := make([]bool, len(real))
	if standIn != "" {
		m := difflib.NewMatcher(real, errorToken.FindAllString(standIn, -1))
		for _, b := range m.GetMatchingBlocks() {
			for i := b.A; i < b.A+b.Size; i++ {
				keep[i] = true
			}
		}
	} else {
		for i, tok := range real {
			_, numErr := strconv.ParseFloat(strings.Trim(tok, "():,;[]"), 64)
			keep[i] = !strings.HasPrefix(tok, `"`) && numErr != nil
		}
	}
	var b strings.Builder
	for i, tok := range real {
		switch {
		case strings.TrimSpace(tok) == "":
			b.WriteString(tok)
		case !keep[i]:
			b.WriteString(redact.Mark)
		case standIn == "" && !filePosition.MatchString(tok):
			// Nothing to compare: a path's labels may be spelled from a
			// secret (data.x107_113_55…), so only labels of letters are
			// kept, as CUE's words and a module's field names are.
			b.WriteString(redactLabels(tok))
		default:
			b.WriteString(tok)
		}
	}
	return b.String()
}

// filePosition is a token naming a place in a file (deploy.cue:12:3).
var filePosition = regexp.MustCompile(`\.cue:\d+:\d+[,;:)]*$`)

// publicLabel is a label kept in an error no stand-in could be set
// against: letters (a definition's #, a hidden field's _ first).
var publicLabel = regexp.MustCompile(`^[(]*[#_]*[A-Za-z]+[,;:()]*$`)

// redactLabels masks each dot-separated label of tok that is not a
// publicLabel.
func redactLabels(tok string) string {
	labels := strings.Split(tok, ".")
	for i, l := range labels {
		if l != "" && !publicLabel.MatchString(l) && strings.Trim(l, "():,;[]!=<>") != "" {
			trail := l[len(strings.TrimRight(l, ":,;)")):]
			labels[i] = redact.Mark + trail
		}
	}
	return strings.Join(labels, ".")
}

// reusable says which components a stand-in render may take from the real
// render (comps, rendered to resources) instead of transforming them
// again: those whose every matched transformer is the catalog's own, whose
// spec is plain data (no definition or hidden field at any depth) equal,
// as JSON, to the real one, and whose labels and annotations are the real
// ones. The catalog's transformers read nothing of a component but its
// spec (#component.spec) and #context (the release's, and the component's
// name, labels and annotations), so such a component renders to the same
// objects: transforming it again would only find nothing differs. Any
// other transformer (a provider of the deployment's own) may read more,
// and its components are always transformed again.
func reusable(comps func() (cue.Value, error), resources []manifest.Resource, transformers []transformer) reuse {
	byComponent := map[string][]manifest.Resource{}
	for _, r := range resources {
		byComponent[r.Component] = append(byComponent[r.Component], r)
	}
	// The real render's side of each comparison is the same for every
	// stand-in render: read and encoded once per component, not once per
	// variant.
	type realSide struct {
		c    component
		spec []byte
		err  error
	}
	reals := map[string]*realSide{}
	realOf := func(name string) *realSide {
		if rs, ok := reals[name]; ok {
			return rs
		}
		rs := &realSide{}
		all, err := comps()
		if err != nil {
			rs.err = err
			reals[name] = rs
			return rs
		}
		real := all.LookupPath(cue.MakePath(cue.Str(name)))
		if rs.c, rs.err = readComponent(name, real); rs.err == nil {
			rs.spec, rs.err = real.LookupPath(cue.ParsePath("spec")).MarshalJSON()
		}
		reals[name] = rs
		return rs
	}
	return func(name string, cv cue.Value) ([]manifest.Resource, bool) {
		rs := realOf(name)
		a, errA := rs.c, rs.err
		b, errB := readComponent(name, cv)
		if errA != nil || errB != nil || !maps.Equal(a.labels, b.labels) || !maps.Equal(a.annotations, b.annotations) {
			return nil, false
		}
		for _, t := range transformers {
			if t.matches(b) && !t.embedded() {
				return nil, false
			}
		}
		specB := cv.LookupPath(cue.ParsePath("spec"))
		if !plainData(specB) {
			return nil, false
		}
		jb, errB := specB.MarshalJSON()
		if errB != nil || !bytes.Equal(rs.spec, jb) {
			return nil, false
		}
		return byComponent[name], true
	}
}

// plainData reports whether v holds no definition and no hidden field at
// any depth: then its JSON is all a reader of its values can see.
func plainData(v cue.Value) bool {
	it, err := v.Fields(cue.Definitions(true), cue.Hidden(true))
	if err != nil {
		// Not a struct: a list's elements, or a scalar.
		if l, err := v.List(); err == nil {
			for l.Next() {
				if !plainData(l.Value()) {
					return false
				}
			}
		}
		return true
	}
	for it.Next() {
		if t := it.Selector().LabelType(); t != cue.StringLabel && t != cue.IndexLabel {
			return false // a definition or a hidden field
		}
		if !plainData(it.Value()) {
			return false
		}
	}
	return true
}

// movedFields are the top-level fields of #config whose values differ
// between the real values and doc, a stand-in render's; known is false
// when they cannot be compared.
func movedFields(real func() (any, error), doc any) (moved []string, known bool) {
	r, err := real()
	a, okA := r.(map[string]any)
	b, okB := doc.(map[string]any)
	if err != nil || !okA || !okB {
		return nil, false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			moved = append(moved, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			moved = append(moved, k)
		}
	}
	return moved, true
}
