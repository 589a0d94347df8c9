package objects

import (
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// entry is a managed-fields entry of manager, as the API server writes it.
func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func withManagers(es ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}
	u.SetManagedFields(es)
	return u
}

// A field opm stops declaring stays when another manager owns it — also
// through a subresource, as an autoscaler owns a Deployment's replicas
// through scale — and goes when nobody else does; the preview names what
// stays and removes only what goes.
func TestRemovedKeepsWhatOthersOwnAlsoThroughASubresource(t *testing.T) {
	live := withManagers(entry(FieldManager, metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:replicas":{},"f:paused":{},"f:minReadySeconds":{}}}`))
	dry := withManagers(
		entry(FieldManager, metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:minReadySeconds":{}}}`),
		entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "scale", `{"f:spec":{"f:replicas":{}}}`),
	)
	f, err := ownershipOf(live, dry, FieldManager, nil)
	assert.NilError(t, err)
	assert.Equal(t, f.removed(nil).String(), ".spec.paused")
	assert.Equal(t, f.keptByOthers(), "no longer declared but kept, another manager owns it: .spec.replicas (kube-controller-manager)")
}
