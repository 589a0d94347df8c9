package discover

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// scattered creates n ConfigMaps cm-0… and last, all of release id, and
// returns their entries: cm-1's labels are then stripped and cm-2 deleted.
func scattered(t *testing.T, ns, id string, n int, last *unstructured.Unstructured) ([]inventory.Entry, dynamic.ResourceInterface) {
	t.Helper()
	setup := cluster(t)
	var entries []inventory.Entry
	for i := range n {
		u := create(t, setup, configMap(ns, fmt.Sprintf("cm-%d", i), labelsFor(release, id)))
		entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: "app"}))
	}
	u := create(t, setup, last)
	entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: "app"}))
	cms := setup.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	stripped, err := cms.Get(t.Context(), "cm-1", metav1.GetOptions{})
	assert.NilError(t, err)
	stripped.SetLabels(nil)
	_, err = cms.Update(t.Context(), stripped, metav1.UpdateOptions{})
	assert.NilError(t, err)
	assert.NilError(t, cms.Delete(t.Context(), "cm-2", metav1.DeleteOptions{}))
	return entries, cms
}

// With the release id, big groups are one LIST each, and entries that LIST
// misses (labels stripped, object gone) still get their own GET.
func TestFromInventoryBatchesByTypeAndNamespace(t *testing.T) {
	ns := env.Namespace(t)
	const id = "0c7e2f1a-4b3d-5e6f-8a9b-1c2d3e4f5a6b"
	entries, _ := scattered(t, ns, id, 6, deployment(ns, "web", labelsFor(release, id)))

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

// A metadata-first read returns each object's metadata as the whole read
// has it (but managedFields), and sends nothing but metadata requests; Whole then reads whole
// only the objects asked for — by GET when they are few of their group, by
// one LIST when they are most of it — and an object gone since is Missing.
func TestFromInventoryMetadataFirstThenWhole(t *testing.T) {
	ns := env.Namespace(t)
	const id = "7a1e2f1a-4b3d-5e6f-8a9b-1c2d3e4f5a6b"
	// The last object of a kind no controller writes to: the two reads
	// below must see the same versions.
	entries, cms := scattered(t, ns, id, 8, obj("v1", "Secret", ns, "web", labelsFor(release, id), map[string]any{"stringData": map[string]any{"k": "v"}}))

	cfg, sent := kubetest.RecordingConfig(env.Config)
	cl, err := kube.FromConfig(cfg, "test", kube.Options{})
	assert.NilError(t, err)
	opts := Options{ReleaseID: id}
	whole, _, err := FromInventory(t.Context(), cl, entries, opts)
	assert.NilError(t, err)
	// Requests for the namespace's objects, as GET or LIST and whole or
	// metadata (discovery is left out).
	objectRequests := func() (gets, lists, metadata int) {
		for _, r := range sent.Take() {
			if !strings.Contains(r.Path, "/namespaces/"+ns+"/") {
				continue
			}
			switch {
			case r.Metadata:
				metadata++
			case strings.HasSuffix(r.Path, "/configmaps") || strings.HasSuffix(r.Path, "/secrets"):
				lists++
			default:
				gets++
			}
		}
		return gets, lists, metadata
	}
	objectRequests()

	opts.MetadataOnly = true
	partial, stats, err := FromInventory(t.Context(), cl, entries, opts)
	assert.NilError(t, err)
	gets, lists, metadata := objectRequests()
	assert.Equal(t, gets+lists, 0, "a metadata-first read reads nothing whole")
	assert.Equal(t, metadata, stats.Requests)
	for i, f := range partial {
		w := whole[i]
		assert.Equal(t, f.Missing, w.Missing, f.Entry.Name)
		if w.Object == nil {
			assert.Check(t, f.Object == nil, f.Entry.Name)
			continue
		}
		assert.Check(t, f.Partial, f.Entry.Name)
		assert.Equal(t, f.Object.GetAPIVersion(), w.Object.GetAPIVersion())
		assert.Equal(t, f.Object.GetKind(), w.Object.GetKind())
		md := maps.Clone(w.Object.Object["metadata"].(map[string]any))
		delete(md, "managedFields")
		assert.DeepEqual(t, f.Object.Object["metadata"], md)
		assert.Equal(t, len(f.Object.Object), 3, "%s holds more than apiVersion, kind and metadata", f.Entry.Name)
	}

	// Two of eight ConfigMaps: a GET each.
	err = Whole(t.Context(), cl, partial, []int{3, 4}, opts)
	assert.NilError(t, err)
	gets, lists, metadata = objectRequests()
	assert.Equal(t, [3]int{gets, lists, metadata}, [3]int{2, 0, 0})
	for i, f := range partial {
		assert.Equal(t, f.Partial, f.Object != nil && i != 3 && i != 4, f.Entry.Name)
	}
	assert.DeepEqual(t, partial[3].Object, whole[3].Object)
	assert.DeepEqual(t, partial[4].Object, whole[4].Object)

	// Most of them: one LIST, a GET for the one without labels and the one
	// deleted since the metadata read.
	assert.NilError(t, cms.Delete(t.Context(), "cm-5", metav1.DeleteOptions{}))
	err = Whole(t.Context(), cl, partial, []int{0, 1, 5, 6, 7}, opts)
	assert.NilError(t, err)
	gets, lists, metadata = objectRequests()
	assert.Equal(t, [3]int{gets, lists, metadata}, [3]int{2, 1, 0})
	for _, i := range []int{0, 1, 6, 7} {
		assert.Check(t, !partial[i].Partial && !partial[i].Missing, partial[i].Entry.Name)
		assert.DeepEqual(t, partial[i].Object, whole[i].Object)
	}
	assert.Check(t, partial[5].Missing && partial[5].Object == nil && !partial[5].Partial, "an object deleted since is missing")
	assert.Check(t, partial[8].Partial, "the Secret was not asked for")
}

// Few of many objects of one type are read whole with one LIST by their
// components, which returns those components' objects and no others.
func TestWholeListsTheWantedComponents(t *testing.T) {
	ns := env.Namespace(t)
	setup := cluster(t)
	const id = "8b1e2f1a-4b3d-5e6f-8a9b-1c2d3e4f5a6b"
	var entries []inventory.Entry
	for i := range 12 {
		l := labelsFor(release, id)
		l[manifest.LabelComponentName] = fmt.Sprintf("c%02d", i)
		u := create(t, setup, configMap(ns, fmt.Sprintf("cm-%d", i), l))
		entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: fmt.Sprintf("c%02d", i)}))
	}
	cfg, sent := kubetest.RecordingConfig(env.Config)
	cl, err := kube.FromConfig(cfg, "test", kube.Options{})
	assert.NilError(t, err)
	opts := Options{ReleaseID: id, MetadataOnly: true}
	found, _, err := FromInventory(t.Context(), cl, entries, opts)
	assert.NilError(t, err)
	sent.Take()

	wanted := []int{1, 4, 7, 10}
	err = Whole(t.Context(), cl, found, wanted, opts)
	assert.NilError(t, err)
	var lists []kubetest.Request
	for _, r := range sent.Take() {
		if strings.Contains(r.Path, "/namespaces/"+ns+"/") {
			lists = append(lists, r)
		}
	}
	assert.Equal(t, len(lists), 1, "%v", lists)
	assert.Equal(t, lists[0].Method, http.MethodGet)
	assert.Check(t, strings.HasSuffix(lists[0].Path, "/configmaps") && !lists[0].Metadata, lists[0].Path)
	q, err := url.ParseQuery(lists[0].Query)
	assert.NilError(t, err)
	sel, err := labels.Parse(q.Get("labelSelector"))
	assert.NilError(t, err)
	for i, f := range found {
		want := slices.Contains(wanted, i)
		assert.Equal(t, !f.Partial, want, f.Entry.Name)
		assert.Equal(t, sel.Matches(labels.Set(f.Object.GetLabels())), want, "the selector %s and %s", sel, f.Entry.Name)
		if want {
			_, hasData := f.Object.Object["data"]
			assert.Check(t, hasData, "%s read whole", f.Entry.Name)
		}
	}
}

// The components' selector names each wanted component once and selects
// nothing else of the release; past maxSelectedComponents names, or with
// a name no label may hold, it falls back to the release's selector.
func TestComponentsSelector(t *testing.T) {
	const id = "9c1e2f1a-4b3d-5e6f-8a9b-1c2d3e4f5a6b"
	entries := make([]inventory.Entry, 2*(maxSelectedComponents+1))
	for i := range entries {
		entries[i].Component = fmt.Sprintf("c%03d", i/2) // two objects each
	}
	sel, err := labels.Parse(componentsSelector(id, entries, []int{0, 1, 6, 9}))
	assert.NilError(t, err)
	// Entries 0 and 1 are c000's, 6 and 7 c003's, 8 and 9 c004's.
	selected := map[int]bool{0: true, 1: true, 6: true, 7: true, 8: true, 9: true}
	for i, e := range entries {
		l := labels.Set{manifest.LabelReleaseUUID: id, manifest.LabelComponentName: e.Component}
		assert.Equal(t, sel.Matches(l), selected[i], "entry %d (%s) by %s", i, e.Component, sel)
	}
	assert.Check(t, !sel.Matches(labels.Set{manifest.LabelReleaseUUID: "other", manifest.LabelComponentName: "c000"}))

	all := make([]int, 0, len(entries))
	for i := 0; i < len(entries); i += 2 {
		all = append(all, i)
	}
	assert.Equal(t, componentsSelector(id, entries, all), releaseSelector(id), "%d components", len(all))
	entries[0].Component = "not a label value!"
	assert.Equal(t, componentsSelector(id, entries, []int{0, 2}), releaseSelector(id))
}

// Metadata first and whole where wanted reads what one whole read does,
// on generated releases: objects of two types spread over components,
// some with their labels stripped or another component's, some deleted
// between the reads, and random sets wanted whole.
func TestMetadataFirstThenWholeIsTheWholeRead(t *testing.T) {
	setup := cluster(t)
	cms := setup.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	rng := rand.New(rand.NewPCG(62, 29))
	for round := range 6 {
		ns := env.Namespace(t)
		id := fmt.Sprintf("6d1e2f1a-4b3d-5e6f-8a9b-1c2d3e4f5a%02d", round)
		var entries []inventory.Entry
		for i := range 10 + rng.IntN(30) {
			comp := fmt.Sprintf("c%02d", rng.IntN(8))
			l := labelsFor(release, id)
			switch rng.IntN(6) {
			case 0:
				l = nil // stripped
			case 1:
				l[manifest.LabelComponentName] = "elsewhere"
			default:
				l[manifest.LabelComponentName] = comp
			}
			u := configMap(ns, fmt.Sprintf("cm-%d", i), l)
			if rng.IntN(3) == 0 {
				u = obj("v1", "Secret", ns, fmt.Sprintf("s-%d", i), l, map[string]any{"stringData": map[string]any{"k": "v"}})
			}
			u = create(t, setup, u)
			entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: comp}))
		}
		opts := Options{ReleaseID: id}
		partial, _, err := FromInventory(t.Context(), setup, entries, Options{ReleaseID: id, MetadataOnly: true})
		assert.NilError(t, err)
		// Rounds want a third, half or all: the components' LIST, the
		// release's and GETs all run.
		var wanted []int
		for i, f := range partial {
			if f.Object == nil || rng.IntN(3-round%3) != 0 {
				continue
			}
			wanted = append(wanted, i)
			if f.Object.GetKind() == "ConfigMap" && rng.IntN(5) == 0 {
				assert.NilError(t, cms.Namespace(ns).Delete(t.Context(), f.Entry.Name, metav1.DeleteOptions{}))
			}
		}
		err = Whole(t.Context(), setup, partial, wanted, opts)
		assert.NilError(t, err)
		whole, _, err := FromInventory(t.Context(), setup, entries, opts)
		assert.NilError(t, err)
		for i, f := range partial {
			w := whole[i]
			if !slices.Contains(wanted, i) {
				assert.Check(t, f.Partial, "round %d: %s was not wanted whole", round, f.Entry.Name)
				continue
			}
			assert.Check(t, !f.Partial, "round %d: %s", round, f.Entry.Name)
			assert.Equal(t, f.Missing, w.Missing, "round %d: %s", round, f.Entry.Name)
			assert.DeepEqual(t, f.Object, w.Object)
		}
	}
}
