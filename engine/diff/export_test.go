package diff

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// YAML returns the normalised object (see Normalize) as YAML with sorted
// keys; "" for nil: what a diff compares, for the tests to read.
func YAML(obj *unstructured.Unstructured, m *Masker) (string, error) {
	if obj == nil {
		return "", nil
	}
	return toYAML(Normalize(obj, m))
}
