package inventory

import (
	"fmt"
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
			entries[i] = Entry{Group: "apps", Kind: "Deployment", Namespace: "production", Name: fmt.Sprintf("checkout-api-%04d", i), V: "v1", Component: fmt.Sprintf("checkout-%04d", i)}
			if withApplied {
				entries[i].Applied = &Applied{RV: fmt.Sprint(48213977 + i), Hash: "CNZ+SsGdPKQaSmtIjw50fA"}
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
// figures are the README's (how many objects fit at a given --max-history).
func TestAppliedRecordSize(t *testing.T) {
	plain, applied := entryBytes(t, false), entryBytes(t, true)
	t.Logf("bytes per entry: %.0f without the applied record, %.0f with it", plain, applied)
	assert.Assert(t, applied-plain <= 80, "the applied record costs %.0f bytes per entry", applied-plain)
	for _, h := range []int{1, 5, 10} {
		t.Logf("max objects at --max-history %d: %d", h, int(MaxSecretBytes/(applied+float64(h-1)*plain)))
	}
}

func TestUnchangedSinceApplied(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"}, "data": map[string]any{"k": "v"}}}
	r := manifest.Resource{Object: u, Component: "app"}
	entries, err := WithApplied([]manifest.Resource{r}, map[manifest.ID]string{r.ID(): "42"})
	assert.NilError(t, err)
	rec := AppliedByID(entries)[r.ID()]
	assert.Assert(t, rec != nil)
	live := u.DeepCopy()
	live.SetResourceVersion("42")
	assert.Assert(t, UnchangedSinceApplied(rec, r, live))

	moved := live.DeepCopy()
	moved.SetResourceVersion("43")
	assert.Assert(t, !UnchangedSinceApplied(rec, r, moved), "a moved resourceVersion is not provably unchanged")
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
