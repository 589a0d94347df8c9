package scope

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

func object(apiVersion, kind, namespace, name string) manifest.Resource {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return manifest.Resource{Object: u, Component: "app"}
}

func release(t *testing.T, rs ...manifest.Resource) *render.Release {
	t.Helper()
	rel := &render.Release{Name: "app", Namespace: "prod", Module: render.Module{Path: "example.com/m@v0", Version: "1.0.0"}, ValuesText: "{}", Resources: rs}
	manifest.Sort(rel.Resources)
	var err error
	rel.ManifestDigest, err = manifest.Digest(rel.Resources)
	assert.NilError(t, err)
	rel.ChangeID = manifest.ChangeID(rel.Module.Path, rel.Module.Version, rel.ValuesText, rel.ManifestDigest)
	return rel
}

// A RESTMapper as discovery builds it: Gizmo is cluster-scoped, Widget is
// namespaced, ConfigMap namespaced; Nothing is not served.
func mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gizmo"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	return m
}

func TestResolveFollowsTheCluster(t *testing.T) {
	rel := release(t,
		object("v1", "ConfigMap", "prod", "settings"),
		object("example.com/v1", "Gizmo", "prod", "g"),   // rendered namespaced, served cluster-scoped
		object("example.com/v1", "Widget", "", "w"),      // rendered cluster-scoped, served namespaced
		object("example.com/v1", "Nothing", "prod", "n"), // not served: left as rendered
	)
	digest, change := rel.ManifestDigest, rel.ChangeID
	moves, err := Resolve(t.Context(), mapper(), rel)
	assert.NilError(t, err)
	assert.Assert(t, is.Len(moves, 2))
	got := map[string]string{}
	for _, r := range rel.Resources {
		got[r.Object.GetKind()] = r.Object.GetNamespace()
	}
	assert.DeepEqual(t, got, map[string]string{"ConfigMap": "prod", "Gizmo": "", "Widget": "prod", "Nothing": "prod"})
	for _, m := range moves {
		switch m.From.Kind {
		case "Gizmo":
			assert.Check(t, strings.Contains(m.String(), "cluster-scoped"), m.String())
		case "Widget":
			assert.Check(t, strings.Contains(m.String(), "namespaced"), m.String())
		}
	}
	// The digest and change ID describe what is applied, in apply order.
	want := release(t, rel.Resources...)
	assert.Check(t, rel.ManifestDigest != digest && rel.ChangeID != change)
	assert.Equal(t, rel.ManifestDigest, want.ManifestDigest)
	assert.Equal(t, rel.ChangeID, want.ChangeID)

	// Nothing to move: nothing changes.
	digest = rel.ManifestDigest
	moves, err = Resolve(t.Context(), mapper(), rel)
	assert.NilError(t, err)
	assert.Check(t, is.Len(moves, 0))
	assert.Equal(t, rel.ManifestDigest, digest)
}
