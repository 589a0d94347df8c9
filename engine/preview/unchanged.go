package preview

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
)

// recordedApplied indexes what the newest change recorded of its apply;
// empty without an inventory.
func recordedApplied(inv *inventory.Inventory) map[manifest.ID]*inventory.Entry {
	if inv == nil {
		return nil
	}
	return inventory.AppliedByID(inv.LatestEntries())
}

// unchangedSinceApplied previews r as unchanged without a server-side dry
// run when the render and the live resourceVersion both still match the
// last apply (inventory.UnchangedSinceApplied): applying it again could
// change nothing, so there is no diff to show.
func unchangedSinceApplied(applied map[manifest.ID]*inventory.Entry, r manifest.Resource, live *unstructured.Unstructured) (Object, bool) {
	if !inventory.UnchangedSinceApplied(applied[r.ID()], r, live) {
		return Object{}, false
	}
	return unchanged(r), true
}

// unchanged is r's preview when nothing changes it.
func unchanged(r manifest.Resource) Object {
	return manifest.ChangeOf(r.ID(), r.GVK().Version, r.Component, manifest.Unchanged)
}
