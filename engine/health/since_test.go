package health

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/objects"
)

// A Deployment's Available moves the clock only while opm owns its
// spec.replicas (an autoscaler's scale-up dips Available); its
// ReplicaFailure always does.
func TestSinceIgnoresAvailableOfAScaledDeployment(t *testing.T) {
	assert.Equal(t, opmFieldManager, objects.FieldManager)
	applied := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	scaled := applied.Add(5 * time.Minute)
	deploy := func(conds []any, managers ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "api"},
			"status": map[string]any{"conditions": conds},
		}}
		u.SetManagedFields(managers)
		return u
	}
	cond := func(typ, status string, at time.Time) any {
		return map[string]any{"type": typ, "status": status, "lastTransitionTime": at.Format(time.RFC3339)}
	}
	owns := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	opm := owns("opm", `{"f:spec":{"f:replicas":{},"f:template":{}}}`)
	hpa := owns("horizontal-pod-autoscaler", `{"f:spec":{"f:replicas":{}}}`)
	other := owns("kubectl-edit", `{"f:metadata":{"f:labels":{}}}`)
	available := []any{cond("Available", "True", scaled), cond("Progressing", "True", scaled)}

	autoscaled := owns("opm", `{"f:spec":{"f:template":{}}}`) // the release leaves the count
	assert.Equal(t, Since(deploy(available, opm)), scaled, "opm owns the count: a dip is a change of health")
	assert.Equal(t, Since(deploy(available, opm, other)), scaled, "another manager owns other fields only")
	assert.Assert(t, Since(deploy(available, autoscaled, hpa)).IsZero(), "an autoscaler owns the count: Available is not counted")
	assert.Assert(t, Since(deploy(available, autoscaled)).IsZero(), "nobody recorded the scale: opm still does not own the count")
	failed := append(available, cond("ReplicaFailure", "True", scaled.Add(time.Minute)))
	assert.Equal(t, Since(deploy(failed, autoscaled)), scaled.Add(time.Minute), "a ReplicaFailure always counts")
}
