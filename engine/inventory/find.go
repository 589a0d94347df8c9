package inventory

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Find looks a release's inventory up by what a user knows without the
// deployment directory: its namespace plus its name, its release id, or
// both (status and delete --name / --release-id). It returns nil and no
// error when there is none; more than one match is an error listing them.
func Find(ctx context.Context, cs kubernetes.Interface, namespace, name, releaseID string) (*Inventory, error) {
	if namespace == "" || (name == "" && releaseID == "") {
		return nil, fmt.Errorf("finding an inventory needs a namespace and a release name or id")
	}
	if name != "" && releaseID != "" {
		return Read(ctx, cs, Release{Name: name, Namespace: namespace, ReleaseID: releaseID})
	}
	set := labels.Set{LabelComponent: ComponentInventory}
	if releaseID != "" {
		set[manifest.LabelReleaseUUID] = releaseID
	} else {
		set[manifest.LabelReleaseName] = name
	}
	sel := set.String()
	list, err := cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list inventory Secrets in %s with %s: %w", namespace, sel, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		inv, err := Decode(&list.Items[0])
		if err != nil {
			registerCorrupt(ctx, &list.Items[0])
			return nil, err
		}
		register(ctx, inv)
		return inv, nil
	}
	names := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("%d releases named %q have inventories in %s (%v): select one with --release-id", len(names), name, namespace, names)
}
