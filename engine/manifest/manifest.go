// Package manifest holds what a render produces: Kubernetes objects tagged
// with the component that made them, their apply order, and the two hashes
// that identify a release's content — the manifest digest and the change ID
// (release inventory RFC, "Deterministic Manifest Serialization" and
// "Change ID").
//
// Nothing here talks to a cluster; every other engine package builds on it.
package manifest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one rendered Kubernetes object and the component that produced it.
type Resource struct {
	Object    *unstructured.Unstructured
	Component string
}

// ID is how Kubernetes identifies an object: group, kind, namespace and name.
// The API version is deliberately not part of it, so an API migration
// (Ingress v1beta1 → v1) never makes an object look stale.
type ID struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Key is an inventory identity: the Kubernetes ID plus the component.
type Key struct {
	ID
	Component string `json:"component"`
}

// Ref names an object in reports (apply results, diffs, reviews): its
// Kubernetes identity with the API version it was written with and the
// component that made it, empty parts left out of the JSON.
type Ref struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Component string `json:"component,omitempty"`
}

// ID is the referenced object's Kubernetes identity.
func (r Ref) ID() ID { return ID{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name} }

// String names the object as kubectl does: kind.group/namespace/name.
func (r Ref) String() string {
	kind := strings.ToLower(r.Kind)
	if r.Group != "" {
		kind += "." + r.Group
	}
	if r.Namespace == "" {
		return kind + "/" + r.Name
	}
	return kind + "/" + r.Namespace + "/" + r.Name
}

// RefOf names an object by its identity, API version and component.
func RefOf(id ID, version, component string) Ref {
	return Ref{Group: id.Group, Version: version, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, Component: component}
}

// GVK returns the object's group, version and kind.
func (r Resource) GVK() schema.GroupVersionKind { return r.Object.GroupVersionKind() }

// ID returns the object's Kubernetes identity.
func (r Resource) ID() ID {
	gvk := r.GVK()
	return ID{Group: gvk.Group, Kind: gvk.Kind, Namespace: r.Object.GetNamespace(), Name: r.Object.GetName()}
}

// Key returns the object's inventory identity.
func (r Resource) Key() Key { return Key{ID: r.ID(), Component: r.Component} }

// String renders the ID as kubectl does: Kind/name or Kind/namespace/name.
func (id ID) String() string {
	kind := id.Kind
	if id.Group != "" {
		kind = id.Kind + "." + id.Group
	}
	if id.Namespace == "" {
		return kind + "/" + id.Name
	}
	return fmt.Sprintf("%s/%s/%s", kind, id.Namespace, id.Name)
}

// IsSecret reports whether the ID names a core Secret, whose data no
// cache keeps and no output shows.
func (id ID) IsSecret() bool { return id.Group == "" && id.Kind == "Secret" }

// GroupKind returns the ID's group and kind.
func (id ID) GroupKind() schema.GroupKind { return schema.GroupKind{Group: id.Group, Kind: id.Kind} }
