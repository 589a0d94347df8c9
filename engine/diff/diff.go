// Package diff is the text differ (not `opm diff`, which is
// engine/preview): it turns two versions of one Kubernetes object into a
// unified diff of their YAML, the text every front door shows for a changed object
// (opm diff, the pull-request review, the job summary). It is the text of
// a diff, not `opm diff` itself: what an apply would change (server-side
// dry run against the live objects, the stale set) is engine/preview,
// which calls this package for each changed object's text.
//
// Both sides are normalised first: fields the API server manages
// (managedFields, resourceVersion, uid, generation, creationTimestamp,
// selfLink, status and kubectl's last-applied-configuration annotation) are
// removed, so only what a user wrote can differ. Secret values are masked
// here, not by callers: every value of a Secret's data and stringData is
// replaced by a marker carrying a short HMAC-SHA-256, under a random key of
// the run (a Masker), of the value and of where it is — the Masker's scope
// (a release in an environment), the object, the field. So the same place
// keeps its marker from one side of a diff to the other (a changed value
// shows as two markers, an unchanged one as one), while equal values at
// different places get unrelated markers: a marker never says that two
// values are equal (no dictionary of public values to compare a secret
// against), nor links to the value (no offline guessing from a public
// pull-request comment) or to another run's markers; no caller can forget
// to mask.
package diff

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/taint"
)

// Options tune Unified.
type Options struct {
	// FromFile and ToFile label the two sides in the diff header
	// ("--- FromFile", "+++ ToFile"); defaults "before" and "after".
	FromFile string
	ToFile   string
	// Context is the number of unchanged lines shown around each change;
	// 0 means 3, a negative value means none.
	Context int
	// Masker masks Secret values; one per run, so equal values get equal
	// markers across all of a run's diffs. Nil uses a fresh one for this
	// diff alone.
	Masker *Masker
}

// MaskPrefix starts every masked Secret value.
const MaskPrefix = "(masked, hmac:"

// Masker turns Secret values into markers keyed by a random per-run key.
type Masker struct {
	key []byte
	// scope is where the objects diffed belong (In): part of every place.
	scope string
	// fields are the fields of one object a secret reaches (engine/taint):
	// masked on both sides of its diff, as a Secret's values are.
	fields []taint.Field
}

// ForObject returns a Masker with m's key that also masks fields (of the
// rendered object, from each render compared) on both sides of a diff: a
// rotated secret is masked in the live object too, though only the new
// value is traced. m itself is unchanged.
func (m *Masker) ForObject(fields ...[]taint.Field) *Masker {
	var all []taint.Field
	for _, fs := range fields {
		all = append(all, fs...)
	}
	if len(all) == 0 {
		return m
	}
	return &Masker{key: m.key, scope: m.scope, fields: all}
}

// In returns a Masker with m's key (and fields) whose markers belong to
// scope — a release in an environment: equal values in two scopes get
// unrelated markers, as in two objects or two fields.
func (m *Masker) In(scope string) *Masker {
	c := *m
	c.scope = m.scope + "\x00" + scope
	return &c
}

// NewMasker returns a Masker with a fresh random key.
func NewMasker() *Masker {
	key := make([]byte, 32)
	// crypto/rand.Read never returns an error (Go 1.24+).
	_, _ = rand.Read(key)
	return &Masker{key: key}
}

// KeyedMasker returns a Masker whose key is derived from key and scope:
// runs given the same key and scope (the shards of one review, on other
// machines) mask equal values equally, and anyone without key still
// cannot link a marker to a value. An empty key gives NewMasker's.
func KeyedMasker(key []byte, scope string) *Masker {
	if len(key) == 0 {
		return NewMasker()
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte("opm-mask-v1\x00" + scope))
	return &Masker{key: h.Sum(nil)}
}

// Mask returns the marker that stands for a secret value at place (an
// object and a field, see Place): the first 12 hex characters of an
// HMAC-SHA-256 of the Masker's scope, place and value under the Masker's
// key. Equal values at one place give equal markers within one Masker;
// anything else, unrelated ones.
func (m *Masker) Mask(place string, value []byte) string {
	h := hmac.New(sha256.New, m.key)
	fmt.Fprintf(h, "%d:%s%d:%s", len(m.scope), m.scope, len(place), place)
	h.Write(value)
	return MaskPrefix + hex.EncodeToString(h.Sum(nil))[:12] + ")"
}

// Place is where a value of obj is: the object's identity and the field's
// path (a Secret's data and stringData are one place per key, as the API
// server merges them).
func Place(obj *unstructured.Unstructured, path ...string) string {
	gvk := obj.GroupVersionKind()
	return strings.Join(append([]string{gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName()}, path...), "\x00")
}

// Unified returns a unified diff of the YAML of before and after, or ""
// when they are equal once normalised. A nil before is an added object
// (every line added), a nil after a removed one; both nil is an error.
func Unified(before, after *unstructured.Unstructured, opts Options) (string, error) {
	if before == nil && after == nil {
		return "", errors.New("diff: both objects are nil")
	}
	m := opts.Masker
	if m == nil {
		m = NewMasker()
	}
	// One object, one set of places: the rendered side's identity names
	// both sides (a live object is the same object).
	ident := cmpObj(after, before)
	na, nb := normalize(before, ident, m), normalize(after, ident, m)
	if len(m.fields) > 0 {
		var desired map[string]any
		if nb != nil {
			desired = nb.Object
		}
		for _, o := range []*unstructured.Unstructured{na, nb} {
			if o != nil {
				o.Object = m.maskFields(ident, o.Object, desired)
			}
		}
	}
	// Equal values encode equally: most objects of a review are
	// unchanged, and their YAML is most of a review's comparing.
	if na != nil && nb != nil && reflect.DeepEqual(na.Object, nb.Object) {
		return "", nil
	}
	a, err := toYAML(na)
	if err != nil {
		return "", fmt.Errorf("encoding the old version of %s: %w", name(before), err)
	}
	b, err := toYAML(nb)
	if err != nil {
		return "", fmt.Errorf("encoding the new version of %s: %w", name(after), err)
	}
	if a == b {
		return "", nil
	}
	ctxLines := opts.Context
	switch {
	case ctxLines == 0:
		ctxLines = 3
	case ctxLines < 0:
		ctxLines = 0
	}
	ud := difflib.UnifiedDiff{
		A: splitLines(a), B: splitLines(b),
		FromFile: cmp.Or(opts.FromFile, "before"), ToFile: cmp.Or(opts.ToFile, "after"),
		Context: ctxLines,
	}
	out, err := difflib.GetUnifiedDiffString(ud)
	if err != nil {
		return "", fmt.Errorf("diffing %s: %w", name(cmpObj(before, after)), err)
	}
	return out, nil
}

func toYAML(obj *unstructured.Unstructured) (string, error) {
	if obj == nil {
		return "", nil
	}
	b, err := manifest.YAML(obj.Object)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// maskFields masks m.fields in obj: values by their marker, keys that
// carry a secret by the marker of the key. Beside a key that carries a
// secret, every key the desired object does not have is masked too: the
// live object's key may carry the secret before it rotated.
func (m *Masker) maskFields(ident *unstructured.Unstructured, obj, desired map[string]any) map[string]any {
	text := func(v any) []byte {
		if s, ok := v.(string); ok {
			return []byte(s)
		}
		b, _ := json.Marshal(v)
		return b
	}
	// Each field once, and not a Secret's data values: Normalize masked
	// them by value already, and a marker masked again (or twice) would
	// give one value several markers.
	secret := obj["apiVersion"] == "v1" && obj["kind"] == "Secret"
	var fields []taint.Field
	seen := map[string]bool{}
	for _, f := range m.fields {
		id := fmt.Sprintf("%q %v", f.Path, f.Key)
		if seen[id] || (secret && !f.Key && len(f.Path) == 2 && (f.Path[0] == "data" || f.Path[0] == "stringData")) {
			continue
		}
		seen[id] = true
		fields = append(fields, f)
	}
	for _, f := range slices.Clone(fields) {
		if !f.Key {
			continue
		}
		parent := f.Path[:len(f.Path)-1]
		here, _ := at(obj, parent).(map[string]any)
		want, _ := at(desired, parent).(map[string]any)
		for k := range here {
			if _, ok := want[k]; !ok {
				fields = append(fields, taint.Field{Path: append(slices.Clone(parent), k), Key: true})
			}
		}
	}
	var out any = obj
	for _, f := range fields {
		place := Place(ident, f.Path...)
		keyPlace := Place(ident, append(slices.Clone(f.Path[:len(f.Path)-1]), "(key)")...)
		out = taint.Mask(out, []taint.Field{f}, func(v any) any { return m.Mask(place, text(v)) }, func(k string) string { return m.Mask(keyPlace, []byte(k)) })
	}
	return out.(map[string]any)
}

func at(v any, path []string) any {
	for _, k := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(x) {
				return nil
			}
			v = x[n]
		default:
			return nil
		}
	}
	return v
}

// Normalize returns a copy of obj without server-managed fields and with
// Secret values masked by m: the form in which objects are compared and
// shown. obj is not modified; nil gives nil.
func Normalize(obj *unstructured.Unstructured, m *Masker) *unstructured.Unstructured {
	return normalize(obj, obj, m)
}

// normalize is Normalize with the places of ident (the object as diffed).
func normalize(obj, ident *unstructured.Unstructured, m *Masker) *unstructured.Unstructured {
	if obj == nil {
		return nil
	}
	out := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(manifest.WithoutServerFields(obj.Object))}
	if meta, ok := out.Object["metadata"].(map[string]any); ok {
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, manifest.LastAppliedAnnotation) // the whole object, a Secret's values in clear text
			if len(ann) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	if isSecret(out) {
		maskField(ident, out.Object, "data", true, m)
		maskField(ident, out.Object, "stringData", false, m)
	}
	return out
}

func isSecret(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// maskField masks every value of the map at field. data values are base64
// and are hashed decoded, and a key of data and the same key of stringData
// are one place, so the same value there gets the same marker. Anything that is not a map of strings is masked whole.
func maskField(ident *unstructured.Unstructured, obj map[string]any, field string, b64 bool, masker *Masker) {
	v, ok := obj[field]
	if !ok || v == nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		obj[field] = "(masked)"
		return
	}
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			m[k] = "(masked)"
			continue
		}
		raw := []byte(s)
		if b64 {
			if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
				raw = dec
			}
		}
		m[k] = masker.Mask(Place(ident, "values", k), raw)
	}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func name(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "nothing"
	}
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", obj.GetKind(), ns, obj.GetName())
	}
	return fmt.Sprintf("%s %s", obj.GetKind(), obj.GetName())
}

func cmpObj(a, b *unstructured.Unstructured) *unstructured.Unstructured {
	if a != nil {
		return a
	}
	return b
}
