package manifest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
)

func obj(apiVersion, kind, ns, name string, data map[string]any) manifest.Resource {
	o := map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
	}
	if ns != "" {
		o["metadata"].(map[string]any)["namespace"] = ns
	}
	for k, v := range data {
		o[k] = v
	}
	return manifest.Resource{Object: &unstructured.Unstructured{Object: o}, Component: "c"}
}

// sample is a set of resources that share weights across kinds and names,
// so only the full 5-key order makes the digest deterministic.
func sample() []manifest.Resource {
	return []manifest.Resource{
		obj("v1", "Service", "a", "web", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}),
		obj("v1", "Service", "a", "api", nil),
		obj("v1", "Service", "b", "api", nil),
		obj("apps/v1", "Deployment", "a", "web", map[string]any{"spec": map[string]any{"replicas": int64(2)}}),
		obj("apps/v1", "StatefulSet", "a", "web", nil),
		obj("v1", "ConfigMap", "a", "cfg", map[string]any{"data": map[string]any{"k": "v", "a": "b"}}),
		obj("v1", "Secret", "a", "cfg", map[string]any{"data": map[string]any{"p": "cw=="}}),
		obj("v1", "Namespace", "", "a", nil),
		obj("example.com/v1", "Widget", "a", "w", nil),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", nil),
	}
}

func digest(t *testing.T, rs []manifest.Resource) string {
	t.Helper()
	d, err := manifest.Digest(rs)
	assert.NilError(t, err)
	return d
}

func TestDigestIgnoresInputOrder(t *testing.T) {
	base := digest(t, sample())
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		rs := sample()
		r.Shuffle(len(rs), func(a, b int) { rs[a], rs[b] = rs[b], rs[a] })
		assert.Equal(t, digest(t, rs), base, "permutation %d", i)
	}
	assert.Assert(t, len(base) == len("sha256:")+64)
}

func TestDigestChangesWithAnyContentByte(t *testing.T) {
	base := digest(t, sample())
	mutations := map[string]func(rs []manifest.Resource){
		"a data value":   func(rs []manifest.Resource) { rs[5].Object.Object["data"].(map[string]any)["k"] = "w" },
		"a number":       func(rs []manifest.Resource) { rs[3].Object.Object["spec"].(map[string]any)["replicas"] = int64(3) },
		"a label added":  func(rs []manifest.Resource) { rs[1].Object.SetLabels(map[string]string{"x": "y"}) },
		"a name":         func(rs []manifest.Resource) { rs[2].Object.SetName("api2") },
		"a namespace":    func(rs []manifest.Resource) { rs[2].Object.SetNamespace("c") },
		"an api version": func(rs []manifest.Resource) { rs[4].Object.SetAPIVersion("apps/v1beta2") },
		"a nested list": func(rs []manifest.Resource) {
			rs[0].Object.Object["spec"].(map[string]any)["ports"] = []any{map[string]any{"port": int64(81)}}
		},
		"an empty string": func(rs []manifest.Resource) { rs[1].Object.Object["spec"] = map[string]any{"type": ""} },
	}
	for name, mutate := range mutations {
		rs := sample()
		mutate(rs)
		assert.Check(t, digest(t, rs) != base, "changing %s must change the digest", name)
	}
}

func TestDigestChangesWhenResourcesAreAddedOrRemoved(t *testing.T) {
	all := sample()
	base := digest(t, all)
	seen := map[string]bool{base: true}
	for i := range all {
		d := digest(t, slices.Delete(slices.Clone(all), i, i+1))
		assert.Check(t, !seen[d], "removing resource %d gives a digest seen before", i)
		seen[d] = true
	}
	added := append(slices.Clone(all), obj("v1", "ConfigMap", "a", "extra", nil))
	assert.Check(t, !seen[digest(t, added)])
	assert.Check(t, digest(t, nil) != base)
}

func TestSortIsTheFiveKeyOrder(t *testing.T) {
	rs := sample()
	manifest.Sort(rs)
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprint(r.ID()))
	}
	assert.DeepEqual(t, got, []string{
		"CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com",
		"Namespace/a",
		"ConfigMap/a/cfg",
		"Secret/a/cfg",
		"Service/a/api",
		"Service/a/web",
		"Service/b/api",
		"Deployment.apps/a/web",
		"StatefulSet.apps/a/web",
		"Widget.example.com/a/w",
	})
}

func TestChangeIDHasFourInputs(t *testing.T) {
	base := manifest.ChangeID("p", "1.0.0", "{a: 1}", "sha256:x")
	assert.Assert(t, len(base) == len("change-sha1-")+8)
	assert.Equal(t, manifest.ChangeID("p", "1.0.0", "{a: 1}", "sha256:x"), base, "deterministic")
	for name, id := range map[string]string{
		"path":    manifest.ChangeID("q", "1.0.0", "{a: 1}", "sha256:x"),
		"version": manifest.ChangeID("p", "1.0.1", "{a: 1}", "sha256:x"),
		"values":  manifest.ChangeID("p", "1.0.0", "{a: 2}", "sha256:x"),
		"digest":  manifest.ChangeID("p", "1.0.0", "{a: 1}", "sha256:y"),
	} {
		assert.Check(t, id != base, "a different %s must give a different change ID", name)
	}
}
