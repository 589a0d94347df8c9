package redact

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/manifest"
)

const canary = "cnry-Q7f9Xk2LmP4vT8wZ"

// Every encoding a leak takes is replaced; a short secret is not looked
// for in free text at all (it would mask unrelated text, and tell which).
func TestSecretsInEveryEncoding(t *testing.T) {
	r := New(manifest.NewSealer([]byte("k")))
	r.Secrets(canary, "4711")
	for _, e := range Encodings(canary) {
		got := r.String("before " + e + " after")
		assert.Equal(t, got, "before "+Mark+" after", "encoding %q", e)
	}
	assert.Equal(t, r.String("port 4711"), "port 4711")
	assert.Equal(t, r.String("x "+base64.StdEncoding.EncodeToString([]byte(canary))), "x "+Mark)
}

// The identifiers of a release holding secrets are sealed in every form a
// table prints them, and a sealed change ID leads back to its change.
func TestSensitiveIdentifiersAreSealedWherePrinted(t *testing.T) {
	s := manifest.NewSealer([]byte("k"))
	r := New(s)
	digest := "sha256:" + strings.Repeat("ab", 32)
	r.Sensitive(digest, "change-sha1-0123abcd")
	out := r.String(digest + " " + strings.Repeat("ab", 32) + " " + strings.Repeat("ab", 6) + " change-sha1-0123abcd")
	assert.Assert(t, !strings.Contains(out, "abab"), out)
	assert.Assert(t, is.Contains(out, s.Digest(digest)))
	assert.Assert(t, is.Contains(out, s.ChangeID("change-sha1-0123abcd")))
	id, ok := r.Unseal(s.ChangeID("change-sha1-0123abcd"), []string{"change-sha1-ffffffff", "change-sha1-0123abcd"})
	assert.Assert(t, ok)
	assert.Equal(t, id, "change-sha1-0123abcd")
	_, ok = New(nil).Unseal(s.ChangeID("change-sha1-0123abcd"), []string{"change-sha1-0123abcd"})
	assert.Assert(t, !ok, "another key does not unseal")
}

func TestNamesGetStableStandIns(t *testing.T) {
	r := New(manifest.NewSealer([]byte("k")))
	a := r.Name("cfg-0815")
	assert.Assert(t, strings.HasPrefix(a, NamePrefix))
	assert.Equal(t, New(manifest.NewSealer([]byte("k"))).Name("cfg-0815"), a)
	assert.Equal(t, r.String("configmap/cfg-0815 created"), "configmap/"+a+" created")
}

// A secret split across two writes of one line is still caught; a nil
// redactor (a library caller) passes text through.
func TestWriterRedactsWholeLines(t *testing.T) {
	r := New(nil)
	r.Secrets(canary)
	var b bytes.Buffer
	w := r.Writer(&b)
	_, _ = w.Write([]byte("token: " + canary[:5]))
	_, _ = w.Write([]byte(canary[5:] + "\nnext " + canary))
	assert.NilError(t, w.Flush())
	assert.Equal(t, b.String(), "token: "+Mark+"\nnext "+Mark)
	var none *Redactor
	assert.Equal(t, none.String(canary), canary)
	assert.Assert(t, From(context.Background()) == nil)
	assert.Equal(t, From(With(context.Background(), r)), r)
}

func TestErrorKeepsItsKind(t *testing.T) {
	r := New(nil)
	r.Secrets(canary)
	base := errors.New("bad value " + canary)
	err := r.Error(base)
	assert.Equal(t, err.Error(), "bad value "+Mark)
	assert.Assert(t, errors.Is(err, base))
}

// Value redacts every string of a result, however deep.
func TestValueRedactsResults(t *testing.T) {
	r := New(nil)
	r.Secrets(canary)
	type inner struct{ S string }
	type result struct {
		A    string
		L    []string
		P    *inner
		M    map[string]string
		skip string
	}
	v := &result{A: canary, L: []string{"x " + canary}, P: &inner{S: canary}, M: map[string]string{"k": canary}, skip: canary}
	r.Value(v)
	assert.DeepEqual(t, *v, result{A: Mark, L: []string{"x " + Mark}, P: &inner{S: Mark}, M: map[string]string{"k": Mark}, skip: canary},
		cmpAllowUnexported)
}

var cmpAllowUnexported = cmp.Exporter(func(reflect.Type) bool { return true })

// A short name a secret reaches ("k") is replaced where it stands as a
// name, never inside other words: rewriting every k of a text would mangle
// it and tell a reader which strings are secret.
func TestShortNamesAreReplacedAsWholeNames(t *testing.T) {
	r := New(manifest.NewSealer([]byte("k")))
	a := r.Name("k")
	got := r.String("configmap/k created; kept 3 keys in namespace kube-system (k)")
	assert.Equal(t, got, "configmap/"+a+" created; kept 3 keys in namespace kube-system ("+a+")")
	assert.Equal(t, r.String(`"k": 1`), `"`+a+`": 1`)
	assert.Equal(t, r.String("k,k k"), a+","+a+" "+a, "neighbours are each whole names")
}
