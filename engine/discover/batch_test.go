package discover

import (
	"fmt"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// With the release id, big groups are one LIST each, and entries that LIST
// misses (labels stripped, object gone) still get their own GET.
func TestFromInventoryBatchesByTypeAndNamespace(t *testing.T) {
	ns := env.Namespace(t)
	setup := cluster(t)
	const id = "0c7e2f1a-4b3d-5e6f-8a9b-1c2d3e4f5a6b"
	var entries []inventory.Entry
	for i := range 6 {
		u := create(t, setup, configMap(ns, fmt.Sprintf("cm-%d", i), labelsFor(release, id)))
		entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: "app"}))
	}
	u := create(t, setup, deployment(ns, "web", labelsFor(release, id)))
	entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: "app"}))

	cms := setup.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	stripped, err := cms.Get(t.Context(), "cm-1", metav1.GetOptions{})
	assert.NilError(t, err)
	stripped.SetLabels(nil)
	_, err = cms.Update(t.Context(), stripped, metav1.UpdateOptions{})
	assert.NilError(t, err)
	assert.NilError(t, cms.Delete(t.Context(), "cm-2", metav1.DeleteOptions{}))

	fetch := func(opts Options) ([]Found, int64) {
		cfg, counter := kubetest.CountingConfig(env.Config)
		cl, err := kube.FromConfig(cfg, "test", kube.Options{})
		assert.NilError(t, err)
		for _, gk := range []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "apps", Kind: "Deployment"}} {
			_, err := cl.Mapper.RESTMapping(gk) // warm discovery: count only fetches
			assert.NilError(t, err)
		}
		counter.Store(0)
		found, stats, err := FromInventory(t.Context(), cl, entries, opts)
		assert.NilError(t, err)
		assert.Equal(t, int64(stats.Requests), counter.Load())
		return found, counter.Load()
	}
	batched, batchedReqs := fetch(Options{ReleaseID: id})
	single, singleReqs := fetch(Options{})

	// One LIST for the six ConfigMaps, a GET each for the two it misses
	// (stripped labels, deleted) and a GET for the lone Deployment.
	assert.Equal(t, batchedReqs, int64(4))
	assert.Equal(t, singleReqs, int64(7))
	for i := range entries {
		assert.Equal(t, batched[i].Entry, entries[i], "entry order is kept")
		assert.Equal(t, batched[i].Missing, single[i].Missing, entries[i].Name)
		assert.Equal(t, batched[i].Object == nil, single[i].Object == nil, entries[i].Name)
	}
	missing := slices.IndexFunc(batched, func(f Found) bool { return f.Missing })
	assert.Equal(t, batched[missing].Entry.Name, "cm-2")
	assert.Check(t, batched[1].Object != nil && batched[1].Object.GetName() == "cm-1", "an object without labels is still found by name")
}
