package diff

import (
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/taint"

	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func configMap(value string) *unstructured.Unstructured {
	return obj(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "staging"},
		"data":     map[string]any{"title": value, "other": "same"},
	})
}

func secret(data map[string]any, stringData map[string]any) *unstructured.Unstructured {
	o := map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": "db", "namespace": "staging"},
	}
	if data != nil {
		o["data"] = data
	}
	if stringData != nil {
		o["stringData"] = stringData
	}
	return obj(o)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestUnifiedModified(t *testing.T) {
	got, err := Unified(configMap("old title"), configMap("new title"), Options{FromFile: "base/cm", ToFile: "head/cm"})
	assert.NilError(t, err)
	assert.Assert(t, strings.HasPrefix(got, "--- base/cm\n+++ head/cm\n@@ "), got)
	assert.Assert(t, is.Contains(got, "\n-  title: old title\n"))
	assert.Assert(t, is.Contains(got, "\n+  title: new title\n"))
	assert.Assert(t, is.Contains(got, "\n   other: same\n"), "unchanged neighbours are context lines")
}

func TestUnifiedEqualIsEmpty(t *testing.T) {
	got, err := Unified(configMap("x"), configMap("x"), Options{})
	assert.NilError(t, err)
	assert.Equal(t, got, "")
}

// Unified answers "equal" without encoding when the objects are deeply
// equal; generated objects with one leaf changed anywhere (a value, a
// type, a key added or removed) still diff, and copies still do not.
func TestUnifiedShortcutHidesNoChange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := r.IntN(6); {
		case depth > 2 || k == 0:
			return []any{"v" + strconv.Itoa(r.IntN(3)), int64(r.IntN(3)), r.IntN(2) == 0, 1.5}[r.IntN(4)]
		case k < 4:
			m := map[string]any{}
			for i := range 1 + r.IntN(3) {
				m["k"+strconv.Itoa(i)] = gen(depth + 1)
			}
			return m
		default:
			var l []any
			for range 1 + r.IntN(3) {
				l = append(l, gen(depth+1))
			}
			return l
		}
	}
	// change replaces one leaf (or adds a key to one map) of v, chosen by r.
	var change func(v any) any
	change = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			keys := slices.Sorted(maps.Keys(v))
			if r.IntN(4) == 0 {
				v["added"] = "x"
				return v
			}
			k := keys[r.IntN(len(keys))]
			v[k] = change(v[k])
			return v
		case []any:
			i := r.IntN(len(v))
			v[i] = change(v[i])
			return v
		case string:
			return v + "'"
		case int64:
			return float64(v) + 0.5
		case bool:
			return !v
		default:
			return "a string now"
		}
	}
	for i := range 500 {
		spec := gen(0)
		a := obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "o"}, "data": spec})
		same, err := Unified(a, a.DeepCopy(), Options{})
		assert.NilError(t, err)
		assert.Equal(t, same, "", "object %d against its copy", i)
		b := a.DeepCopy()
		b.Object["data"] = change(b.Object["data"])
		got, err := Unified(a, b, Options{})
		assert.NilError(t, err)
		assert.Assert(t, got != "", "object %d: a change was reported equal:\n%v\n%v", i, a.Object, b.Object)
	}
}

func TestUnifiedAddedAndRemoved(t *testing.T) {
	added, err := Unified(nil, configMap("x"), Options{})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(added, "@@ -0,0 +1,"))
	for _, l := range strings.Split(strings.TrimSuffix(added, "\n"), "\n")[3:] {
		assert.Assert(t, strings.HasPrefix(l, "+"), "every body line of an added object is an addition: %q", l)
	}
	removed, err := Unified(configMap("x"), nil, Options{})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(removed, "+0,0 @@"))
	for _, l := range strings.Split(strings.TrimSuffix(removed, "\n"), "\n")[3:] {
		assert.Assert(t, strings.HasPrefix(l, "-"), "every body line of a removed object is a removal: %q", l)
	}
	_, err = Unified(nil, nil, Options{})
	assert.ErrorContains(t, err, "both objects are nil")
}

func TestUnifiedDropsServerFields(t *testing.T) {
	live := configMap("x")
	meta := live.Object["metadata"].(map[string]any)
	meta["managedFields"] = []any{map[string]any{"manager": "opm"}}
	meta["resourceVersion"] = "42"
	meta["uid"] = "0b7c"
	meta["generation"] = int64(3)
	meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
	meta["selfLink"] = "/api/v1/x"
	meta["annotations"] = map[string]any{manifest.LastAppliedAnnotation: `{"data":{"title":"x"}}`}
	live.Object["status"] = map[string]any{"phase": "Active"}

	got, err := Unified(live, configMap("x"), Options{})
	assert.NilError(t, err)
	assert.Equal(t, got, "", "only server-managed fields differ")

	// Normalize works on a copy.
	assert.Equal(t, live.Object["metadata"].(map[string]any)["resourceVersion"], "42")

	// A user annotation next to last-applied stays.
	meta["annotations"].(map[string]any)["team"] = "blue"
	got, err = Unified(live, configMap("x"), Options{})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(got, "-    team: blue"))
	assert.Assert(t, !strings.Contains(got, manifest.LastAppliedAnnotation))
}

func TestUnifiedContext(t *testing.T) {
	before := configMap("a")
	after := configMap("b")
	none, err := Unified(before, after, Options{Context: -1})
	assert.NilError(t, err)
	assert.Assert(t, !strings.Contains(none, "other: same"), none)
	wide, err := Unified(before, after, Options{Context: 100})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(wide, " apiVersion: v1"))
}

// The core promise: a Secret change shows that a value changed, never the
// value, in clear text or base64, on either side.
func TestUnifiedMasksSecretValues(t *testing.T) {
	const oldPass, newPass, keep = "hunter2-old-password", "correct-horse-battery", "unchanged-token-value"
	before := secret(map[string]any{"password": b64(oldPass), "token": b64(keep)}, map[string]any{"extra": oldPass})
	after := secret(map[string]any{"password": b64(newPass), "token": b64(keep)}, map[string]any{"extra": newPass})
	// kubectl's annotation carries the values in clear text too.
	before.SetAnnotations(map[string]string{manifest.LastAppliedAnnotation: `{"stringData":{"extra":"` + oldPass + `"}}`})

	m := NewMasker()
	Mask := func(key string, v []byte) string { return m.Mask(Place(after, "values", key), v) }
	got, err := Unified(before, after, Options{Masker: m})
	assert.NilError(t, err)
	for _, secretText := range []string{oldPass, newPass, keep, b64(oldPass), b64(newPass), b64(keep)} {
		assert.Assert(t, !strings.Contains(got, secretText), "secret material %q leaked:\n%s", secretText, got)
	}
	assert.Assert(t, is.Contains(got, "-  password: "+Mask("password", []byte(oldPass))))
	assert.Assert(t, is.Contains(got, "+  password: "+Mask("password", []byte(newPass))))
	assert.Assert(t, is.Contains(got, "-  extra: "+Mask("extra", []byte(oldPass))))
	// An unchanged value is the same marker on both sides: a context line.
	assert.Assert(t, is.Contains(got, "\n   token: "+Mask("token", []byte(keep))+"\n"))
	// The same value under another key is another marker: nothing says
	// that password and extra were equal.
	assert.Assert(t, Mask("password", []byte(oldPass)) != Mask("extra", []byte(oldPass)))
	assert.Equal(t, Mask("password", []byte(oldPass)), Normalize(before, m).Object["data"].(map[string]any)["password"])
	assert.Assert(t, strings.HasPrefix(Mask("x", []byte("x")), MaskPrefix))
	assert.Equal(t, len(Mask("x", []byte("x"))), len(MaskPrefix)+12+1)
	// Unsalted, a marker would let anyone confirm a guessed value offline;
	// keyed per run, it matches neither the plain hash nor another run.
	sum := sha256.Sum256([]byte(oldPass))
	assert.Assert(t, !strings.Contains(got, hex.EncodeToString(sum[:])[:6]), got)
	assert.Assert(t, NewMasker().Mask(Place(after, "values", "password"), []byte(oldPass)) != Mask("password", []byte(oldPass)))
	// Without a Masker, one diff still marks equal values equally.
	again, err := Unified(before, after, Options{})
	assert.NilError(t, err)
	assert.Assert(t, is.Regexp(`\n   token: \(masked, hmac:[0-9a-f]{12}\)\n`, again))
}

func TestUnifiedMasksAddedAndRemovedSecrets(t *testing.T) {
	const pass = "s3cr3t-value-for-added"
	s := secret(map[string]any{"p": b64(pass), "odd": int64(7)}, nil)
	for _, pair := range [][2]*unstructured.Unstructured{{nil, s}, {s, nil}} {
		m := NewMasker()
		got, err := Unified(pair[0], pair[1], Options{Masker: m})
		assert.NilError(t, err)
		assert.Assert(t, !strings.Contains(got, pass) && !strings.Contains(got, b64(pass)), got)
		assert.Assert(t, is.Contains(got, m.Mask(Place(s, "values", "p"), []byte(pass))))
		assert.Assert(t, is.Contains(got, "odd: (masked)"), "a non-string value is masked whole")
	}
	// A malformed data field is masked whole as well.
	bad := secret(nil, nil)
	bad.Object["data"] = "cGxhaW4="
	y, err := YAML(bad, NewMasker())
	assert.NilError(t, err)
	assert.Assert(t, !strings.Contains(y, "cGxhaW4="), y)
}

func TestNonSecretsAreNotMasked(t *testing.T) {
	// A custom resource called Secret in another group is not a core Secret.
	cr := obj(map[string]any{
		"apiVersion": "example.com/v1", "kind": "Secret",
		"metadata": map[string]any{"name": "x"},
		"data":     map[string]any{"k": "visible"},
	})
	y, err := YAML(cr, NewMasker())
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(y, "k: visible"))
}

// The fields a secret reaches in a ConfigMap are masked on both sides, the
// old (rotated) value too, and a change still shows as a change; a key
// that carries the secret is masked, and so is the live side's old key.
// A public field equal to the secret's text stays readable (no oracle).
func TestSecretFieldsMaskedInAnyObject(t *testing.T) {
	cm := func(token string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"},
			"data": map[string]any{"token": token, "url": "https://u:" + token + "@h", "plain": "visible", "public": "tok-new-77", "k-" + token: "v"},
		}}
	}
	fields := []taint.Field{{Path: []string{"data", "k-tok-new-77"}, Key: true}, {Path: []string{"data", "token"}}, {Path: []string{"data", "url"}}}
	m := NewMasker().ForObject(fields)
	out, err := Unified(cm("tok-old-11"), cm("tok-new-77"), Options{Masker: m})
	assert.NilError(t, err)
	assert.Assert(t, !strings.Contains(out, "tok-old-11"), out)
	assert.Assert(t, strings.Contains(out, "-  token: (masked, hmac:"), out)
	assert.Assert(t, strings.Contains(out, "+  token: (masked, hmac:"), out)
	assert.Assert(t, strings.Contains(out, "plain: visible"), out)
	assert.Assert(t, strings.Contains(out, "public: tok-new-77"), out)
	assert.Assert(t, !strings.Contains(out, "k-tok-new-77"), out)
	same, err := Unified(cm("tok-new-77"), cm("tok-new-77"), Options{Masker: m})
	assert.NilError(t, err)
	assert.Equal(t, same, "")
}

// One place keeps one marker in one run, whatever diff shows it: a Secret
// added, removed or modified, with the fields a secret reaches traced once
// or from both renders, a Secret's data (base64) or stringData. Everything
// else — the same value under another key, in another object, another
// namespace, a traced ConfigMap field, another scope (release and
// environment) — gets an unrelated marker: markers link nothing.
func TestOnePlaceOneMarkerAndNothingElseLinked(t *testing.T) {
	secret := func(ns, field, key, v string) *unstructured.Unstructured {
		if field == "data" {
			v = base64.StdEncoding.EncodeToString([]byte(v))
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "s", "namespace": ns}, field: map[string]any{key: v}}}
	}
	config := func(v string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c"}, "data": map[string]any{"dsn": v}}}
	}
	m := NewMasker()
	marker := func(got string) string {
		t.Helper()
		i := strings.Index(got, MaskPrefix)
		assert.Assert(t, i >= 0, got)
		return got[i : i+len(MaskPrefix)+13]
	}
	place := Place(secret("a", "data", "password", ""), "values", "password")
	want := map[string]string{"first": m.Mask(place, []byte("first")), "second": m.Mask(place, []byte("second"))}
	for _, field := range []string{"data", "stringData"} {
		traced := []taint.Field{{Path: []string{field, "password"}}}
		for name, c := range map[string]struct {
			before, after *unstructured.Unstructured
			masker        *Masker
		}{
			"added":            {nil, secret("a", field, "password", "second"), m.ForObject(traced)},
			"removed":          {secret("a", field, "password", "first"), nil, m.ForObject(traced)},
			"modified":         {secret("a", field, "password", "first"), secret("a", field, "password", "second"), m},
			"modified-traced":  {secret("a", field, "password", "first"), secret("a", field, "password", "second"), m.ForObject(traced)},
			"traced-from-both": {secret("a", field, "password", "first"), secret("a", field, "password", "second"), m.ForObject(traced, traced)},
		} {
			got, err := Unified(c.before, c.after, Options{Masker: c.masker})
			assert.NilError(t, err)
			if c.before != nil {
				assert.Assert(t, strings.Contains(got, "-  password: "+want["first"]), "%s %s:\n%s", field, name, got)
			}
			if c.after != nil {
				assert.Assert(t, strings.Contains(got, "+  password: "+want["second"]), "%s %s:\n%s", field, name, got)
			}
		}
	}
	seen := map[string]string{want["second"]: "the Secret's password"}
	added := func(what string, o *unstructured.Unstructured, mk *Masker) {
		t.Helper()
		got, err := Unified(nil, o, Options{Masker: mk})
		assert.NilError(t, err)
		mark := marker(got)
		assert.Assert(t, seen[mark] == "", "%s has the marker of %s: %s", what, seen[mark], mark)
		seen[mark] = what
	}
	added("another key", secret("a", "data", "token", "second"), m)
	added("another namespace", secret("b", "data", "password", "second"), m)
	added("another scope", secret("a", "data", "password", "second"), m.In("release web in prod"))
	added("a traced ConfigMap field", config("second"), m.ForObject([]taint.Field{{Path: []string{"data", "dsn"}}}))
}
