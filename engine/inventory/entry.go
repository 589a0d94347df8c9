// Package inventory records which objects a release applied, in one Secret
// per release (opm.<release>.<release-id>, type opmodel.dev/release), with
// a history of changes. It also computes the stale set: what a previous
// change applied that the current render no longer produces.
//
// Layout, naming, labels and update semantics follow the release inventory
// RFC and its implementation decisions (seeds 004 and 003).
package inventory

import (
	"github.com/opmodel/pipeline/engine/manifest"
)

// Entry is one object in an inventory. Identity is the object's
// Kubernetes identity (group, kind, namespace, name: the same type every
// package names an object by, stored under the same keys) and component;
// V (the API version) is kept apart so an API migration never makes an
// object look stale.
type Entry struct {
	manifest.ID
	V         string `json:"v"`
	Component string `json:"component"`
	// Applied is what the last successful apply left; only the newest
	// change carries it (see applied.go). Optional: readers that do not
	// know it ignore it, and an entry without it is simply never skipped.
	Applied *Applied `json:"applied,omitempty"`
	// Secret: a field of the object carried a secret when it was applied
	// (engine/taint); SecretName: its name did. Public outputs withhold
	// such an object's content, and its name, once it is no longer
	// rendered and only the inventory knows it.
	Secret     bool `json:"secret,omitempty"`
	SecretName bool `json:"secretName,omitempty"`
}

// Ref names the recorded object as every report does: the inventory keeps
// the seeds' keys ("v", "component"), the code one identity carrier.
func (e Entry) Ref() manifest.Ref { return manifest.RefOf(e.ID, e.V, e.Component) }

// EntryFor is the entry that records the object r names.
func EntryFor(r manifest.Ref) Entry { return Entry{ID: r.ID(), V: r.Version, Component: r.Component} }

// Key returns the entry's inventory identity.
func (e Entry) Key() manifest.Key { return manifest.Key{ID: e.ID, Component: e.Component} }

// EntryOf records a rendered resource.
func EntryOf(r manifest.Resource) Entry {
	gvk := r.GVK()
	return Entry{ID: manifest.ID{Group: gvk.Group, Kind: gvk.Kind, Namespace: r.Object.GetNamespace(), Name: r.Object.GetName()}, V: gvk.Version, Component: r.Component}
}

// Entries records rendered resources, in their order.
func Entries(rs []manifest.Resource) []Entry {
	out := make([]Entry, 0, len(rs))
	for _, r := range rs {
		out = append(out, EntryOf(r))
	}
	return out
}

// Stale returns the entries of previous that current no longer has, in
// reverse apply order (the order to delete them in). An entry whose
// Kubernetes object is still rendered, only by another component, is a
// component rename and never stale: deleting it would delete the object
// the current render just applied.
func Stale(previous, current []Entry) []Entry {
	keys := make(map[manifest.Key]bool, len(current))
	ids := make(map[manifest.ID]bool, len(current))
	for _, e := range current {
		keys[e.Key()] = true
		ids[e.ID] = true
	}
	var stale []Entry
	for _, e := range previous {
		if keys[e.Key()] || ids[e.ID] {
			continue
		}
		stale = append(stale, e)
	}
	SortForDelete(stale)
	return stale
}
