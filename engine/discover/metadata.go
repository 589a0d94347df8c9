package discover

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// partial is an object of kind gvk that holds m and nothing else: what a
// metadata-only read (PartialObjectMetadata) gives, as unstructured
// content, without managedFields. No reader of metadata alone needs them
// (an ownership check or a live hash reads the object whole), and turning
// their field sets into maps was half the conversion's CPU.
func partial(gvk schema.GroupVersionKind, m *metav1.ObjectMeta) (*unstructured.Unstructured, error) {
	bare := *m
	bare.ManagedFields = nil
	md, err := metadataOf(&bare)
	if err != nil {
		return nil, fmt.Errorf("converting the metadata of %s %s: %w", gvk.Kind, m.Name, err)
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}}, nil
}

// metadataOf is m as unstructured content: what
// runtime.DefaultUnstructuredConverter.ToUnstructured gives, written out
// field by field. The label scan converts the metadata of every object it
// lists (a release's objects, and the ReplicaSets and Pods its workloads
// made carry the same labels), and the converter's reflection was most of
// the scan's CPU in the client (TestMetadataOfIsTheConverters holds the
// two equal on generated metadata).
func metadataOf(m *metav1.ObjectMeta) (map[string]any, error) {
	out := make(map[string]any, 12)
	str := func(key, v string) {
		if v != "" {
			out[key] = v
		}
	}
	str("name", m.Name)
	str("generateName", m.GenerateName)
	str("namespace", m.Namespace)
	//lint:ignore SA1019 written as the converter writes it: an older server still sends it
	str("selfLink", m.SelfLink)
	str("uid", string(m.UID))
	str("resourceVersion", m.ResourceVersion)
	if m.Generation != 0 {
		out["generation"] = m.Generation
	}
	if !m.CreationTimestamp.IsZero() {
		out["creationTimestamp"] = timeOf(m.CreationTimestamp)
	}
	if m.DeletionTimestamp != nil {
		out["deletionTimestamp"] = timeOf(*m.DeletionTimestamp)
	}
	if m.DeletionGracePeriodSeconds != nil {
		out["deletionGracePeriodSeconds"] = *m.DeletionGracePeriodSeconds
	}
	strings := func(key string, v map[string]string) {
		if len(v) == 0 {
			return
		}
		c := make(map[string]any, len(v))
		for k, s := range v {
			c[k] = s
		}
		out[key] = c
	}
	strings("labels", m.Labels)
	strings("annotations", m.Annotations)
	if len(m.OwnerReferences) > 0 {
		refs := make([]any, len(m.OwnerReferences))
		for i, r := range m.OwnerReferences {
			ref := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
			if r.Controller != nil {
				ref["controller"] = *r.Controller
			}
			if r.BlockOwnerDeletion != nil {
				ref["blockOwnerDeletion"] = *r.BlockOwnerDeletion
			}
			refs[i] = ref
		}
		out["ownerReferences"] = refs
	}
	if len(m.Finalizers) > 0 {
		fs := make([]any, len(m.Finalizers))
		for i, f := range m.Finalizers {
			fs[i] = f
		}
		out["finalizers"] = fs
	}
	if len(m.ManagedFields) > 0 {
		entries := make([]any, len(m.ManagedFields))
		for i, e := range m.ManagedFields {
			entry := make(map[string]any, 7)
			set := func(key, v string) {
				if v != "" {
					entry[key] = v
				}
			}
			set("manager", e.Manager)
			set("operation", string(e.Operation))
			set("apiVersion", e.APIVersion)
			if e.Time != nil {
				entry["time"] = timeOf(*e.Time)
			}
			set("fieldsType", e.FieldsType)
			if e.FieldsV1 != nil {
				var fields any
				if err := utiljson.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
					return nil, err
				}
				entry["fieldsV1"] = fields
			}
			set("subresource", e.Subresource)
			entries[i] = entry
		}
		out["managedFields"] = entries
	}
	return out, nil
}

// timeOf is a timestamp as the converter writes it: RFC 3339 in UTC, to
// the second; nil for the zero time.
func timeOf(t metav1.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}
