// Package discover finds a release's objects on the cluster, by one of two
// strategies (release inventory RFC, "Command Impact"; identity design,
// "Union discovery"):
//
//   - "inventory": FromInventory fetches exactly the objects the inventory
//     Secret recorded, with one targeted GET each and never a scan.
//   - "labels": ByLabels is the fallback when there is no inventory Secret
//     (objects applied before inventories existed, or the Secret was
//     deleted). It lists every listable resource type with two label
//     selectors — release id, and managed-by plus release name — run
//     separately because selectors cannot OR across keys, and unions the
//     results by metadata.uid so an object carrying both labels appears once
//     and pre-identity objects (name label only) are still found.
//
// Neither strategy ever returns the inventory Secret, objects a controller
// made (an ownerReference with controller: true), or Endpoints and
// EndpointSlices: the peer tool's label scan deleted controller-made
// Endpoints, and a delete built on this package must not repeat that.
//
// Ghosts implements layer-2 ghost detection (RFC scenario F): labelled
// objects that neither the inventory nor the render knows about.
//
// Kinds are always resolved through the cluster's RESTMapper at the server's
// preferred version; a version recorded in an inventory is never used for a
// request, because it may no longer be served (RFC edge case 6).
package discover

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Strategies, as Stats.Strategy and debug output name them.
const (
	StrategyInventory = "inventory"
	StrategyLabels    = "labels"
)

// defaultWorkers bounds concurrent requests: enough to hide latency, few
// enough not to flood an API server shared with others.
const defaultWorkers = 8

// Options tune discovery.
type Options struct {
	// Workers is how many requests run at once; 8 when zero or negative.
	Workers int
	// ReleaseID, for FromInventory, lets many objects of one type be
	// fetched with one LIST by the release-id label (see FromInventory).
	ReleaseID string
	// MetadataOnly reads metadata only (PartialObjectMetadata, in
	// protobuf): each object comes back with its apiVersion, kind and
	// metadata (without managedFields), no spec, data or status — what a
	// ghost scan needs to tell a ghost, or a diff to tell that a recorded
	// object has not moved, at a fraction of the transfer and decoding. A
	// caller that needs more reads it whole (Fetch after ByLabels, Whole
	// after FromInventory).
	MetadataOnly bool
}

func (o Options) workers() int {
	if o.Workers <= 0 {
		return defaultWorkers
	}
	return o.Workers
}

// Stats describes how a discovery went, for debug output and benchmarks.
type Stats struct {
	// Strategy is StrategyInventory or StrategyLabels.
	Strategy string
	// Requests counts the GET and LIST requests (each page of a list) the
	// call sent. Discovery documents are cached per kube.Cluster and are
	// not counted here; CountingConfig measures everything on the wire.
	Requests int
	// Types is how many resource types a label scan listed.
	Types int
	// Skipped names what a label scan could not look at (API groups whose
	// discovery failed, types the credentials may not list), so a caller
	// can say the result may be incomplete.
	Skipped []string
}

// excludedKind reports kinds that are never part of a release: Endpoints
// and EndpointSlices are made by controllers and copy a Service's labels.
func excludedKind(gk schema.GroupKind) bool {
	switch gk {
	case schema.GroupKind{Kind: "Endpoints"}, schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:
		return true
	}
	return false
}

// excluded reports objects discovery must never return: OPM's own
// objects (the inventory Secret, the release lock's Lease, inventory
// backups: all carry opmodel.dev/component), controller-owned objects and
// controller-made endpoints.
func excluded(u *unstructured.Unstructured) bool {
	if _, ok := u.GetLabels()[inventory.LabelComponent]; ok {
		return true
	}
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return excludedKind(u.GroupVersionKind().GroupKind())
}

// IDOf returns an object's Kubernetes identity.
func IDOf(u *unstructured.Unstructured) manifest.ID {
	return manifest.ID{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// EntryOf describes a discovered object as an inventory entry, taking the
// component from its component.opmodel.dev/name label, so objects found by
// labels can be handed to code written for inventory entries (status,
// delete, health.Wait).
func EntryOf(u *unstructured.Unstructured) inventory.Entry {
	return inventory.EntryOf(manifest.Resource{Object: u, Component: u.GetLabels()[manifest.LabelComponentName]})
}

// Entries applies EntryOf to each object, in order.
func Entries(objs []*unstructured.Unstructured) []inventory.Entry {
	out := make([]inventory.Entry, 0, len(objs))
	for _, u := range objs {
		out = append(out, EntryOf(u))
	}
	return out
}

// Ghosts returns the labelled objects (from ByLabels) that none of the
// known ID sets contains — typically the inventory's and the render's. They
// are scenario F's ghosts: created by an apply whose inventory was never
// written. Objects are compared by group, kind, namespace and name, so an
// API version change does not make an object a ghost. Order is kept.
func Ghosts(labelled []*unstructured.Unstructured, known ...[]manifest.ID) []*unstructured.Unstructured {
	seen := make(map[manifest.ID]bool)
	for _, ids := range known {
		for _, id := range ids {
			seen[id] = true
		}
	}
	var ghosts []*unstructured.Unstructured
	for _, u := range labelled {
		if !seen[IDOf(u)] {
			ghosts = append(ghosts, u)
		}
	}
	return ghosts
}
