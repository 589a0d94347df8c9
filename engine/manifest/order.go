package manifest

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// weights orders kinds for apply (ascending) and delete (descending): what
// others depend on goes first. Unknown kinds (custom resources) go last.
var weights = map[string]int{
	"CustomResourceDefinition":       -100,
	"Namespace":                      0,
	"ClusterRole":                    5,
	"ClusterRoleBinding":             5,
	"ServiceAccount":                 10,
	"Role":                           10,
	"RoleBinding":                    10,
	"Secret":                         15,
	"ConfigMap":                      15,
	"StorageClass":                   20,
	"PersistentVolume":               20,
	"PersistentVolumeClaim":          20,
	"Service":                        50,
	"Deployment":                     100,
	"StatefulSet":                    100,
	"DaemonSet":                      100,
	"ReplicaSet":                     100,
	"Job":                            110,
	"CronJob":                        110,
	"Ingress":                        150,
	"NetworkPolicy":                  150,
	"HorizontalPodAutoscaler":        200,
	"VerticalPodAutoscaler":          200,
	"PodDisruptionBudget":            200,
	"MutatingWebhookConfiguration":   500,
	"ValidatingWebhookConfiguration": 500,
}

// defaultWeight is the weight of every kind not listed (custom resources).
const defaultWeight = 1000

// Weight returns the apply weight of a kind. Kinds are matched by name only,
// except that a kind from a group other than the built-in ones is a custom
// resource and always weighs defaultWeight.
func Weight(gk schema.GroupKind) int {
	if !builtinGroup(gk.Group) {
		return defaultWeight
	}
	if w, ok := weights[gk.Kind]; ok {
		return w
	}
	return defaultWeight
}

func builtinGroup(g string) bool {
	switch g {
	case "", "apps", "batch", "networking.k8s.io", "rbac.authorization.k8s.io", "storage.k8s.io",
		"autoscaling", "policy", "apiextensions.k8s.io", "admissionregistration.k8s.io", "autoscaling.k8s.io":
		return true
	}
	return false
}

// CompareIDs is the total apply order: weight, then group, kind, namespace
// and name. No two valid objects share all five, so the order is unique.
func CompareIDs(a, b ID) int {
	return cmp.Or(
		cmp.Compare(Weight(a.GroupKind()), Weight(b.GroupKind())),
		cmp.Compare(a.Group, b.Group),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
	)
}

// Sort puts resources in apply order, in place.
func Sort(rs []Resource) {
	slices.SortStableFunc(rs, func(a, b Resource) int { return CompareIDs(a.ID(), b.ID()) })
}
