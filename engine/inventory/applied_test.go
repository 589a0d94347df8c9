package inventory

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
)

// entryBytes is what one entry of a typical 1 000-object release costs in
// the stored Secret (base64 of the JSON, as dataSize counts it), with and
// without the Applied record.
func entryBytes(t *testing.T, withApplied bool) float64 {
	t.Helper()
	const n = 1000
	size := func(count int) int {
		inv := New(Release{Name: "shop", Namespace: "production", ReleaseID: "1c3f6e0a-3d4b-5c6d-8e9f-0a1b2c3d4e5f"})
		entries := make([]Entry, count)
		for i := range entries {
			entries[i] = Entry{ID: manifest.ID{Group: "apps", Kind: "Deployment", Namespace: "production", Name: fmt.Sprintf("checkout-api-%04d", i)}, V: "v1", Component: fmt.Sprintf("checkout-%04d", i)}
			if withApplied {
				entries[i].Applied = &Applied{RV: fmt.Sprint(48213977 + i), Hash: "CNZ+SsGdPKQaSmtIjw50fA", Live: "q0VWm3LhZ8cP2tRx"}
			}
		}
		inv.Record("change-sha1-0123abcd", Change{Inventory: EntryList{Entries: entries}}, time.Unix(0, 0), 1)
		data, err := inv.encodeData()
		assert.NilError(t, err)
		return dataSize(data)
	}
	return float64(size(n)-size(0)) / n
}

// The record adds a bounded number of bytes to the newest change only; the
// figures are docs/cli-guide.md's (how many objects fit at a given --max-history).
func TestAppliedRecordSize(t *testing.T) {
	plain, applied := entryBytes(t, false), entryBytes(t, true)
	t.Logf("bytes per entry: %.0f without the applied record, %.0f with it", plain, applied)
	assert.Assert(t, applied-plain <= 120, "the applied record costs %.0f bytes per entry", applied-plain)
	for _, h := range []int{1, 5, 10} {
		t.Logf("max objects at --max-history %d: %d", h, int(MaxSecretBytes/(applied+float64(h-1)*plain)))
	}
}

func TestUnchangedSinceApplied(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"}, "data": map[string]any{"k": "v"}}}
	r := manifest.Resource{Object: u, Component: "app"}
	entries, err := WithApplied([]manifest.Resource{r}, map[manifest.ID]LiveState{r.ID(): {RV: "42"}})
	assert.NilError(t, err)
	rec := AppliedByID(entries)[r.ID()]
	assert.Assert(t, rec != nil)
	assert.Equal(t, rec.Applied.Live, "", "no live object, no live hash")
	live := u.DeepCopy()
	live.SetResourceVersion("42")
	assert.Assert(t, UnchangedSinceApplied(rec, r, live))

	moved := live.DeepCopy()
	moved.SetResourceVersion("43")
	assert.Assert(t, !UnchangedSinceApplied(rec, r, moved), "a moved resourceVersion without a live hash is not provably unchanged")
	other := r
	other.Object = u.DeepCopy()
	other.Object.Object["data"] = map[string]any{"k": "w"}
	assert.Assert(t, !UnchangedSinceApplied(rec, other, live), "a different render is not unchanged")
	assert.Assert(t, !UnchangedSinceApplied(rec, r, nil), "an absent object is not unchanged")
	assert.Assert(t, !UnchangedSinceApplied(nil, r, live), "an object never recorded is not unchanged")

	// No resourceVersion known (a dry run, a recreate): no record at all.
	entries, err = WithApplied([]manifest.Resource{r}, nil)
	assert.NilError(t, err)
	assert.Assert(t, entries[0].Applied == nil)
}

// liveDeployment is a Deployment as the server returns it: managed fields
// of opm's apply and of the controller's status updates, and a status.
func liveDeployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "ns", "resourceVersion": "100", "generation": int64(1), "uid": "u-1",
			"labels": map[string]any{"tier": "web"},
			"managedFields": []any{
				map[string]any{"manager": "opm", "operation": "Apply", "apiVersion": "apps/v1", "time": "2026-11-23T10:00:00Z", "fieldsType": "FieldsV1",
					"fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}},
				map[string]any{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2026-11-23T10:00:01Z", "fieldsType": "FieldsV1",
					"subresource": "status", "fieldsV1": map[string]any{"f:status": map[string]any{"f:replicas": map[string]any{}}}},
			},
		},
		"spec":   map[string]any{"replicas": int64(2)},
		"status": map[string]any{"replicas": int64(0)},
	}}
}

// LiveHash ignores what no apply acts on and sees everything else.
func TestLiveHash(t *testing.T) {
	base := liveDeployment()
	want, err := LiveHash(base, false)
	assert.NilError(t, err)
	managed := func(u *unstructured.Unstructured, i int) map[string]any {
		return u.Object["metadata"].(map[string]any)["managedFields"].([]any)[i].(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		same   bool
	}{
		{"resourceVersion", func(u *unstructured.Unstructured) { u.SetResourceVersion("101") }, true},
		{"status", func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"replicas": int64(2), "readyReplicas": int64(2)}
		}, true},
		{"status manager's fields", func(u *unstructured.Unstructured) {
			managed(u, 1)["fieldsV1"] = map[string]any{"f:status": map[string]any{"f:readyReplicas": map[string]any{}}}
		}, true},
		{"managed fields time", func(u *unstructured.Unstructured) { managed(u, 0)["time"] = "2026-11-23T11:00:00Z" }, true},
		{"spec field", func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"replicas": int64(5)} }, false},
		{"label", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"tier": "hacked"}) }, false},
		{"annotation", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"owner": "x"}) }, false},
		{"uid (recreated)", func(u *unstructured.Unstructured) { u.SetUID("u-2") }, false},
		{"field ownership", func(u *unstructured.Unstructured) { managed(u, 0)["manager"] = "kubectl" }, false},
		{"scale subresource owner", func(u *unstructured.Unstructured) {
			mf := u.Object["metadata"].(map[string]any)["managedFields"].([]any)
			u.Object["metadata"].(map[string]any)["managedFields"] = append(mf, map[string]any{"manager": "hpa", "operation": "Update", "subresource": "scale",
				"fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}})
		}, false},
	} {
		u := liveDeployment()
		tc.change(u)
		got, err := LiveHash(u, false)
		assert.NilError(t, err)
		assert.Check(t, (got == want) == tc.same, "%s: same hash %v, want %v", tc.name, got == want, tc.same)
	}
	// LiveHash does not modify the object it hashes.
	assert.DeepEqual(t, base.Object, liveDeployment().Object)
	// A kind whose rendered object sets status keeps it in the hash.
	withStatus := liveDeployment()
	withStatus.Object["status"] = map[string]any{"phase": "other"}
	a, _ := LiveHash(liveDeployment(), true)
	b, _ := LiveHash(withStatus, true)
	assert.Check(t, a != b, "status counts when the render sets it")
}

// A moved resourceVersion is still unchanged while the live hash matches:
// a controller's status update is not a reason to dry-run.
func TestUnchangedSinceAppliedByLiveHash(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "ns"}, "spec": map[string]any{"replicas": int64(2)}}}
	r := manifest.Resource{Object: desired, Component: "app"}
	applied := liveDeployment()
	entries, err := WithApplied([]manifest.Resource{r}, map[manifest.ID]LiveState{r.ID(): {RV: "100", Object: applied}})
	assert.NilError(t, err)
	rec := AppliedByID(entries)[r.ID()]
	assert.Assert(t, rec.Applied.Live != "")
	assert.Equal(t, len(rec.Applied.Live), len(WorstLiveHash))

	statusMoved := liveDeployment()
	statusMoved.SetResourceVersion("140")
	statusMoved.Object["status"] = map[string]any{"replicas": int64(2)}
	assert.Assert(t, UnchangedSinceApplied(rec, r, statusMoved))

	edited := statusMoved.DeepCopy()
	edited.Object["spec"] = map[string]any{"replicas": int64(3)}
	assert.Assert(t, !UnchangedSinceApplied(rec, r, edited), "a spec edit is seen")

	// An object not at the recorded resourceVersion is not hashed.
	stale := liveDeployment()
	stale.SetResourceVersion("99")
	entries, err = WithApplied([]manifest.Resource{r}, map[manifest.ID]LiveState{r.ID(): {RV: "100", Object: stale}})
	assert.NilError(t, err)
	assert.Equal(t, entries[0].Applied.Live, "")
}

// A change's seal holds while its entries are the ones written; removing,
// adding or editing an entry, or a change recorded without a seal, breaks it.
func TestSealedChangeDetectsEditedEntries(t *testing.T) {
	entries := []Entry{
		{ID: manifest.ID{Kind: "ConfigMap", Namespace: "a", Name: "one"}, V: "v1", Applied: &Applied{RV: "1", Hash: "h1"}},
		{ID: manifest.ID{Kind: "Secret", Namespace: "a", Name: "two"}, V: "v1", Applied: &Applied{RV: "2", Hash: "h2"}},
	}
	c := Change{ManifestDigest: "sha256:00", Inventory: EntryList{Entries: slices.Clone(entries)}}
	if c.Sealed() {
		t.Fatal("a change without a seal is sealed")
	}
	c.Seal()
	if !c.Sealed() {
		t.Fatal("a sealed change is not")
	}
	for name, edit := range map[string]func(c *Change){
		"an entry removed": func(c *Change) { c.Inventory.Entries = c.Inventory.Entries[1:] },
		"an entry added": func(c *Change) {
			c.Inventory.Entries = append(c.Inventory.Entries, Entry{ID: manifest.ID{Kind: "Service", Name: "x"}})
		},
		"a name edited":      func(c *Change) { c.Inventory.Entries[0].Name = "other" },
		"an applied hash":    func(c *Change) { c.Inventory.Entries[1].Applied = &Applied{RV: "2", Hash: "hX"} },
		"the count edited":   func(c *Change) { c.Objects++ },
		"no manifest digest": func(c *Change) { c.ManifestDigest = "" },
	} {
		e := c
		e.Inventory.Entries = slices.Clone(c.Inventory.Entries)
		edit(&e)
		if e.Sealed() {
			t.Errorf("%s: still sealed", name)
		}
	}
}
