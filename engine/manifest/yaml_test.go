package manifest

import (
	"encoding/json"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// The YAML writer is sigs.k8s.io/yaml's output without its JSON round
// trip: on any object decoded from JSON as a rendered object is (numbers
// as int64 or float64, strings that read as YAML booleans, numbers or
// nulls, multi-line and unicode text, empty maps and lists, nested
// lists), both write the same bytes — except where go-yaml's key order is
// no order for a map's keys, and its text depends on the map's random
// iteration (there the writer is checked to print one text every time).
func FuzzYAMLIsSigsYAML(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1"}},"data":{"yes":"no","n":"012","f":"1.50","e":"","nl":"a\nb\n","u":"é<>&","t":"true","null":"null","sp":" lead","colon":"a: b","hash":"# c","item10":"","item2":"","a-1":"","a_1":"","A":"","Z":"","_":""}}`,
		`{"kind":"Deployment","spec":{"replicas":3,"f":1.5,"big":12345678901234,"neg":-1,"z":0,"e":1e21,"small":1e-7,"whole":2.0,"b":true,"n":null,"l":[],"m":{},"ll":[[1,"a"],[{"k":"v"}]]}}`,
		`{"kind":"Secret","data":{"k":"c2VjcmV0"},"stringData":{"multi":"line1\nline2","tab":"a\tb","quote":"'\"","long":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbb"}}`,
		`{"kind":"X","metadata":{"name":"~","annotations":{"a":"-","b":"[x]","c":"{y}","d":"*","e":"&a","f":"!t","g":"%","h":"@","i":"` + "`" + `"}}}`,
		`{"kind":"1","2":{"7":"","07":"","007":"","0A":"01","A":"0"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u := &unstructured.Unstructured{}
		if json.Unmarshal(b, &map[string]any{}) != nil || u.UnmarshalJSON(b) != nil {
			return
		}
		got, err := YAML(u.Object)
		assert.NilError(t, err)
		if unordered(u.Object) {
			again, err := YAML(u.Object)
			assert.NilError(t, err)
			assert.Equal(t, string(again), string(got), "one text every time")
			return
		}
		want, err := sigsyaml.Marshal(u.Object)
		if err != nil {
			return
		}
		assert.Equal(t, string(got), string(want))
	})
}

// unordered reports whether a map under v holds keys go-yaml's order
// does not put in one order: two it cannot tell apart, or a cycle.
func unordered(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k, kv := range v {
			keys = append(keys, k)
			if unordered(kv) {
				return true
			}
		}
		slices.Sort(keys)
		slices.SortStableFunc(keys, keyOrder)
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if !naturalLess(keys[i], keys[j]) {
					return true
				}
			}
		}
	case []any:
		for _, e := range v {
			if unordered(e) {
				return true
			}
		}
	}
	return false
}

// BenchmarkYAML writes a Deployment-sized object as `opm render` does
// (YAML) and as sigs.k8s.io/yaml would (SigsYAML).
func BenchmarkYAML(b *testing.B) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web-0042","namespace":"bench","labels":{"app.kubernetes.io/name":"web-0042","app.kubernetes.io/managed-by":"opm","module-release.opmodel.dev/name":"bench","module-release.opmodel.dev/uuid":"fca62a8f-94ec-549d-8af3-32673ea379f8","component.opmodel.dev/name":"web-0042"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app.kubernetes.io/name":"web-0042"}},"template":{"metadata":{"labels":{"app.kubernetes.io/name":"web-0042"}},"spec":{"containers":[{"name":"web","image":"ghcr.io/example/web:1.4.2","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],"env":[{"name":"MODE","value":"production"},{"name":"LEVEL","value":"info"}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"256Mi"}}}]}}}}`)); err != nil {
		b.Fatal(err)
	}
	b.Run("YAML", func(b *testing.B) {
		for b.Loop() {
			if _, err := YAML(u.Object); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SigsYAML", func(b *testing.B) {
		for b.Loop() {
			if _, err := sigsyaml.Marshal(u.Object); err != nil {
				b.Fatal(err)
			}
		}
	})
}
