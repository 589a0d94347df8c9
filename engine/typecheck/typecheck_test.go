package typecheck

import (
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCheckNamesTheQuantityFieldsTheServerDoesNot(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{
				map[string]any{"name": "ok", "resources": map[string]any{"limits": map[string]any{"memory": "64Mi", "cpu": 0.5}}},
				map[string]any{"name": "bad", "resources": map[string]any{"limits": map[string]any{"memory": "12x"}}},
			},
			"volumes": []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{"sizeLimit": "1 GB"}}},
		}}},
	}}
	got := Check(obj)
	assert.DeepEqual(t, got, []Invalid{
		{Path: "spec.template.spec.containers[1].resources.limits[memory]", Value: "12x", Why: "a quantity such as 128Mi, 0.5 or 500m"},
		{Path: "spec.template.spec.volumes[0].emptyDir.sizeLimit", Value: "1 GB", Why: "a quantity such as 128Mi, 0.5 or 500m"},
	})
	// Custom resources are the server's to name.
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{"size": "12x"}}}
	assert.Assert(t, Check(cr) == nil)
}
