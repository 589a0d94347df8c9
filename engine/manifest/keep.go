package manifest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Annotations that keep an object when its release stops rendering it:
// prune and delete leave it on the cluster (and in the inventory, as
// kept). Helm's is read because charts taken over carry it; opm's own says
// the same for objects that were never Helm's.
const (
	AnnotationHelmResourcePolicy = "helm.sh/resource-policy"
	AnnotationResourcePolicy     = "opmodel.dev/resource-policy"
	ResourcePolicyKeep           = "keep"
)

// KeptBy returns the annotation that asks to keep an object, or "".
func KeptBy(annotations map[string]string) string {
	for _, a := range []string{AnnotationResourcePolicy, AnnotationHelmResourcePolicy} {
		if annotations[a] == ResourcePolicyKeep {
			return a
		}
	}
	return ""
}

// Guard is what deleting an object of a guarded kind destroys beyond the
// object itself, and the flag that allows it. Apply, prune and delete keep
// such an object unless the flag is given, and --force never re-creates
// one without it.
type Guard struct {
	Flag string
	// Kind names the kind in messages ("Namespace", "PersistentVolumeClaim").
	Kind string
	// Loses says what a delete takes with it, after "deleting one deletes".
	Loses string
}

var guards = map[schema.GroupKind]Guard{
	{Kind: "Namespace"}:             {Flag: "--prune-namespaces", Kind: "Namespace", Loses: "everything in it"},
	{Kind: "PersistentVolumeClaim"}: {Flag: "--prune-pvcs", Kind: "PersistentVolumeClaim", Loses: "its data"},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: {
		Flag: "--prune-crds", Kind: "CustomResourceDefinition", Loses: "every custom resource of its kind, in every namespace"},
}

// GuardOf returns the guard of gk's kind, if it has one.
func GuardOf(gk schema.GroupKind) (Guard, bool) {
	g, ok := guards[gk]
	return g, ok
}

// IsCRD reports whether id is a CustomResourceDefinition.
func IsCRD(id ID) bool {
	return id.Group == "apiextensions.k8s.io" && id.Kind == "CustomResourceDefinition"
}

// Unguarded says which guards a run lifts (the flags it was given).
type Unguarded struct {
	Namespaces, PVCs, CRDs bool
}

// Allows reports whether g is lifted.
func (u Unguarded) Allows(g Guard) bool {
	switch g.Flag {
	case "--prune-namespaces":
		return u.Namespaces
	case "--prune-pvcs":
		return u.PVCs
	case "--prune-crds":
		return u.CRDs
	}
	return true
}

// Tracks reports whether an object's labels say release name (id) tracks
// it: without them apply takes the object over only when adopting.
func Tracks(labels map[string]string, name, id string) bool {
	return labels[LabelManagedBy] == ManagedByOPM && (labels[LabelReleaseUUID] == id || labels[LabelReleaseName] == name)
}

// AdoptHint is the next step for an object that exists without the
// release's labels: take it over with --adopt, or delete it, unless
// deleting it takes more than the object (a CRD's custom resources, a
// claim's data, a namespace's contents).
func AdoptHint(id ID) string {
	if g, ok := GuardOf(id.GroupKind()); ok {
		return fmt.Sprintf("pass --adopt to take ownership (do not delete it: deleting a %s deletes %s)", g.Kind, g.Loses)
	}
	return "delete it, or pass --adopt to take ownership"
}
