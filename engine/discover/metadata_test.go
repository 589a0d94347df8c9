package discover

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/randfill"
)

// metadataOf writes out what the converter's reflection gives: the two are
// compared on thousands of generated ObjectMetas (every field set or not,
// empty and nil maps and lists, zero and non-zero times with nanoseconds
// and zones, managedFields with nested field sets), and on the metadata
// of real objects the API server returned.
func TestMetadataOfIsTheConverters(t *testing.T) {
	f := randfill.NewWithSeed(62).NilChance(0.25).NumElements(0, 3).Funcs(
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			b, err := json.Marshal(fieldSet(c, 3))
			assert.NilError(t, err)
			fv.Raw = b
		},
		func(tm *metav1.Time, c randfill.Continue) {
			if c.Intn(4) == 0 {
				*tm = metav1.Time{}
				return
			}
			*tm = metav1.Unix(c.Int63n(4_000_000_000), c.Int63n(1_000_000_000))
		},
	)
	compare := func(what string, m *metav1.ObjectMeta) {
		t.Helper()
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
		assert.NilError(t, err)
		got, err := metadataOf(m)
		assert.NilError(t, err)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: metadataOf differs from the converter (-converter +metadataOf):\n%s", what, cmp.Diff(want, got))
		}
	}
	compare("empty", &metav1.ObjectMeta{})
	for i := range 5000 {
		var m metav1.ObjectMeta
		f.Fill(&m)
		compare(fmt.Sprintf("generated %d", i), &m)
	}
	// What the API server answers with.
	listed := 0
	defer func() { assert.Assert(t, listed >= 2, "only %d objects listed", listed) }()
	cl := cluster(t)
	ns := env.Namespace(t)
	create(t, cl, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "listed", "namespace": ns, "labels": map[string]any{"a": "b"}, "annotations": map[string]any{"c": "d"}, "finalizers": []any{"example.com/keep"}},
		"data":     map[string]any{"k": "v"}}})
	for _, resource := range []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "serviceaccounts"}} {
		l, err := cl.Metadata.Resource(resource).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		for _, item := range l.Items {
			compare(resource.Resource+"/"+item.Name, &item.ObjectMeta)
			listed++
		}
	}
}

// fieldSet is a managedFields field set: nested objects keyed like the
// API server's ("f:name", "k:{...}", "v:...", "."), depth deep at most.
func fieldSet(c randfill.Continue, depth int) map[string]any {
	out := map[string]any{}
	for range c.Intn(4) {
		key := []string{"f:", "k:", "v:", "."}[c.Intn(4)] + c.String(6)
		if depth > 0 && c.Bool() {
			out[key] = fieldSet(c, depth-1)
		} else {
			out[key] = map[string]any{}
		}
	}
	return out
}
