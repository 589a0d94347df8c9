package objects

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CustomResources counts the custom resources a CustomResourceDefinition
// serves, in every namespace: what deleting it would delete. A CRD that
// is gone serves none.
func (c *Client) CustomResources(ctx context.Context, crdName string) (int, error) {
	crd, err := c.cluster.Dynamic.Resource(crdResource).Get(ctx, crdName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count the custom resources of CustomResourceDefinition %s: %w", crdName, err)
	}
	gvr, ok := servedResource(crd)
	if !ok {
		return 0, nil
	}
	n := 0
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.cluster.Dynamic.Resource(gvr).List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("count the custom resources of CustomResourceDefinition %s: list %s: %w", crdName, gvr.GroupResource(), err)
		}
		n += len(list.Items)
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return n, nil
		}
	}
}

// servedResource is the resource of a CRD's storage version (any served
// version lists every object), or false when it serves none.
func servedResource(crd *unstructured.Unstructured) (schema.GroupVersionResource, bool) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		name, _ := m["name"].(string)
		if storage, _ := m["storage"].(bool); storage || version == "" {
			version = name
		}
	}
	if group == "" || plural == "" || version == "" {
		return schema.GroupVersionResource{}, false
	}
	return schema.GroupVersionResource{Group: group, Version: version, Resource: plural}, true
}
