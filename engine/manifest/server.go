package manifest

import (
	"encoding/base64"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serverSetMetadata are the metadata fields the API server sets or manages
// on every write, never what a user declared. Apply's no-op check, every
// diff and the review compare objects without them (and without status),
// so this is the one list of them.
var serverSetMetadata = [...]string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"}

// LastAppliedAnnotation is where client-side `kubectl apply` keeps the whole
// object as last applied (a Secret's values in clear text). Diffs never show
// it; apply drops it when it takes an object over, as Flux does, so a later
// `kubectl apply` does not three-way merge from a stale copy.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// WithoutServerFields returns obj without status and without the metadata
// the server sets (serverSetMetadata). Only the top level and metadata are
// copied: the rest is shared with obj, which is not modified.
func WithoutServerFields(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	delete(out, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		for _, k := range serverSetMetadata {
			delete(m, k)
		}
		out["metadata"] = m
	}
	return out
}

// NormalizeSecret returns obj with a Secret's stringData merged into data
// (stringData wins, as the API server does), or obj itself when there is
// nothing to merge. stringData is write-only: the server stores it in data,
// and field ownership recorded under stringData never covers the stored key,
// so a key renamed in stringData would stay in data forever. Applying data
// makes the applier own the stored keys (fluxcd/pkg/ssa does the same).
func NormalizeSecret(obj *unstructured.Unstructured) *unstructured.Unstructured {
	gvk := obj.GroupVersionKind()
	if gvk.Group != "" || gvk.Kind != "Secret" {
		return obj
	}
	sd, ok := obj.Object["stringData"].(map[string]any)
	if !ok {
		return obj
	}
	out := obj.DeepCopy()
	data, _ := out.Object["data"].(map[string]any)
	if data == nil {
		data = make(map[string]any, len(sd))
	}
	for k, v := range sd {
		s, ok := v.(string)
		if !ok {
			return obj // not a map of strings: let the server say what is wrong
		}
		data[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	out.Object["data"] = data
	delete(out.Object, "stringData")
	return out
}
