package reconcile

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/preview"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// patchCounter counts PATCH requests (server-side applies, dry run or
// not) sent through a cluster's clients.
type patchCounter struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (p patchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch {
		p.n.Add(1)
	}
	return p.next.RoundTrip(req)
}

func countingCluster(t *testing.T) (*kube.Cluster, *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return patchCounter{next: rt, n: n} })
	cl, err := kube.FromConfig(cfg, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	return cl, n
}

const skipDeploymentDoc = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
  labels: {tier: web}
  annotations: {owner: team-a}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.27"}]
`

// classes previews rel twice — reading every object whole, and from a
// prefetch's metadata-first read as diff does — and holds both to the
// same objects, diffs and dry runs. It returns each rendered object's
// class by name, how many PATCH requests (dry runs) a preview sent, and
// how many objects the prefetched preview read whole.
func classes(t *testing.T, rel *render.Release) (map[string]manifest.Action, int64, int) {
	t.Helper()
	cl, n := countingCluster(t)
	pv, err := preview.Release(t.Context(), cl, rel, preview.Options{})
	assert.NilError(t, err)
	out := map[string]manifest.Action{}
	for _, o := range pv.Objects {
		out[o.ID().Kind+"/"+o.ID().Name] = o.Action
	}
	patches := n.Load()

	cfg, sent := kubetest.RecordingConfig(env.Config)
	pcl, err := kube.FromConfig(cfg, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	pf := preview.StartPrefetch(t.Context(), pcl, rel, preview.Options{})
	ppv, err := preview.Release(t.Context(), pcl, rel, preview.Options{Prefetched: pf})
	assert.NilError(t, err)
	assert.DeepEqual(t, ppv.Objects, pv.Objects)
	whole := 0
	for _, r := range sent.Take() {
		switch {
		case r.Method == http.MethodPatch:
			patches--
		case !r.Metadata && r.Method == http.MethodGet && strings.Contains(r.Path, "/namespaces/"+rel.Namespace+"/") && !strings.Contains(r.Path, "/secrets"):
			whole++
		}
	}
	assert.Equal(t, patches, int64(0), "the prefetched preview sent other dry runs")
	return out, n.Load(), whole
}

func applyCounting(t *testing.T, rel *render.Release) (*Result, int64) {
	t.Helper()
	cl, n := countingCluster(t)
	res, err := Apply(t.Context(), cl, rel, Options{})
	assert.NilError(t, err)
	return res, n.Load()
}

// Re-apply and diff skip the dry run only while the render and the live
// object (its resourceVersion, or its live hash) both match the last
// apply; every hand edit SSA would revert is still found, and a
// status-only update is not drift and needs no dry run.
func TestUnchangedSinceAppliedSkipsDryRunButSeesDrift(t *testing.T) {
	// The Deployment's status is written by hand below, and a deployment
	// controller would move its resourceVersion at any moment (every status
	// update does), so this runs on the plane without controllers. The
	// package's tests run one at a time, so swapping env is safe.
	withControllers := env
	env = env.WithoutControllers(t)
	t.Cleanup(func() { env = withControllers })
	ns := env.Namespace(t)
	rel := direct(t, "skip", ns, skipDeploymentDoc, configMapDoc(ns, "cfg"))
	_, _ = applyCounting(t, rel)

	// The inventory records each object's resourceVersion and desired hash.
	entries := secret(t, rel).Changes[rel.ChangeID].Inventory.Entries
	assert.Equal(t, len(entries), 2)
	for _, e := range entries {
		assert.Assert(t, e.Applied != nil, "%s has no applied record", e.ID)
		u := live(t, e.Group+"/"+e.V, e.Kind, ns, e.Name)
		if e.Group == "" {
			u = live(t, e.V, e.Kind, ns, e.Name)
		}
		assert.Equal(t, e.Applied.RV, u.GetResourceVersion(), "%s", e.ID)
	}

	// Nothing moved: no PATCH at all, neither for diff nor for apply, and
	// the metadata told it: nothing read whole.
	got, patches, whole := classes(t, rel)
	assert.Equal(t, whole, 0)
	assert.DeepEqual(t, got, map[string]manifest.Action{"Deployment/web": manifest.Unchanged, "ConfigMap/cfg": manifest.Unchanged})
	assert.Equal(t, patches, int64(0))
	res, patches := applyCounting(t, rel)
	assert.DeepEqual(t, names(res.Applied), []string{"ConfigMap/cfg=unchanged", "Deployment/web=unchanged"})
	assert.Equal(t, patches, int64(0))

	dep := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	edit := func(manager string, change func(u *unstructured.Unstructured)) {
		t.Helper()
		ri := cluster(t).Dynamic.Resource(dep).Namespace(ns)
		u, err := ri.Get(context.Background(), "web", metav1.GetOptions{})
		assert.NilError(t, err)
		change(u)
		_, err = ri.Update(context.Background(), u, metav1.UpdateOptions{FieldManager: manager})
		assert.NilError(t, err)
	}
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
	}{
		{"spec field", func(u *unstructured.Unstructured) {
			assert.NilError(t, unstructured.SetNestedField(u.Object, int64(5), "spec", "replicas"))
		}},
		{"label", func(u *unstructured.Unstructured) {
			l := u.GetLabels()
			l["tier"] = "hacked"
			u.SetLabels(l)
		}},
		{"annotation", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a["owner"] = "someone-else"
			u.SetAnnotations(a)
		}},
	} {
		edit("kubectl-edit", tc.change)
		got, _, _ := classes(t, rel)
		assert.Equal(t, got["Deployment/web"], manifest.Modified, "diff after a %s edit", tc.name)
		assert.Equal(t, got["ConfigMap/cfg"], manifest.Unchanged)
		res, _ := applyCounting(t, rel)
		assert.DeepEqual(t, names(res.Applied), []string{"ConfigMap/cfg=unchanged", "Deployment/web=configured"})
		u := live(t, "apps/v1", "Deployment", ns, "web")
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		assert.Equal(t, replicas, int64(2), "after a %s edit", tc.name)
		assert.Equal(t, u.GetLabels()["tier"], "web")
		assert.Equal(t, u.GetAnnotations()["owner"], "team-a")
		// And the new resourceVersion is recorded: skipped again.
		_, patches := applyCounting(t, rel)
		assert.Equal(t, patches, int64(0), "re-apply after repairing a %s edit", tc.name)
	}

	// Controller-style status updates move the resourceVersion but are not
	// drift, and the live hash proves it without a dry run: neither the
	// first (a new managed-fields entry for the status subresource) nor a
	// later one (the same entry, new values and time).
	ri := cluster(t).Dynamic.Resource(dep).Namespace(ns)
	for gen := int64(7); gen <= 8; gen++ {
		u, err := ri.Get(context.Background(), "web", metav1.GetOptions{})
		assert.NilError(t, err)
		assert.NilError(t, unstructured.SetNestedField(u.Object, gen, "status", "observedGeneration"))
		assert.NilError(t, unstructured.SetNestedField(u.Object, gen-5, "status", "replicas"))
		st, err := ri.UpdateStatus(context.Background(), u, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
		assert.NilError(t, err)
		assert.Assert(t, st.GetResourceVersion() != u.GetResourceVersion())
		got, patches, whole = classes(t, rel)
		assert.Equal(t, got["Deployment/web"], manifest.Unchanged)
		assert.Equal(t, patches, int64(0), "status update %d: nothing is dry-run", gen)
		assert.Equal(t, whole, 1, "status update %d: the Deployment's version moved, so its content tells", gen)
		res, patches = applyCounting(t, rel)
		assert.DeepEqual(t, names(res.Applied), []string{"ConfigMap/cfg=unchanged", "Deployment/web=unchanged"})
		assert.Equal(t, patches, int64(0), "status update %d: nothing is applied", gen)
		assert.Equal(t, live(t, "apps/v1", "Deployment", ns, "web").GetResourceVersion(), st.GetResourceVersion(), "a status-only change is not written over")
	}

	// A hand edit after status updates is still seen and repaired.
	edit("kubectl-edit", func(u *unstructured.Unstructured) {
		assert.NilError(t, unstructured.SetNestedField(u.Object, int64(9), "spec", "replicas"))
	})
	got, _, _ = classes(t, rel)
	assert.Equal(t, got["Deployment/web"], manifest.Modified, "diff after an edit that follows status updates")
	res, _ = applyCounting(t, rel)
	assert.DeepEqual(t, names(res.Applied), []string{"ConfigMap/cfg=unchanged", "Deployment/web=configured"})

	// A different render is never skipped.
	rel2 := direct(t, "skip", ns, skipDeploymentDoc, `{apiVersion: v1, kind: ConfigMap, metadata: {name: cfg, namespace: NS}, data: {key: other}}`)
	got, _, whole = classes(t, rel2)
	assert.Equal(t, got["ConfigMap/cfg"], manifest.Modified)
	assert.Equal(t, got["Deployment/web"], manifest.Unchanged)
	assert.Equal(t, whole, 1, "only the ConfigMap whose render moved is read whole")

	// Older changes do not carry the record; the inventory stays readable
	// by code that knows only the RFC's fields.
	applyCounting(t, rel2)
	s := secret(t, rel2)
	for _, id := range s.Index[1:] {
		for _, e := range s.Changes[id].Inventory.Entries {
			assert.Assert(t, e.Applied == nil, "change %s entry %s keeps its applied record", id, e.ID)
		}
	}
}
