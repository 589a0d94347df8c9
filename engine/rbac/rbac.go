// Package rbac computes the least privilege a release needs: the Roles
// (and, for cluster-scoped objects, the ClusterRole) with exactly the
// resources it renders, in exactly the namespaces it writes, plus the
// inventory Secret and the lock's Lease, bound to the identity an
// environment impersonates. Applying them, then the release as that
// identity, works; anything else the identity tries is refused by the API
// server.
package rbac

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/render"
)

// The verbs the pipeline uses on the objects it owns: GET and LIST (diff,
// status, the ghost scan, batched reads), PATCH (server-side apply, dry
// runs included), CREATE (the API server authorises the first apply of an
// object as a create, with its name) and DELETE (prune, delete). Nothing
// updates or watches them.
func manage() []string { return []string{"get", "list", "patch", "create", "delete"} }

// named are the verbs granted on objects named one by one (resourceNames):
// LIST cannot be limited to names, so it is left out.
func named() []string { return []string{"get", "patch", "create", "delete"} }

// guarded are the namespaced resources whose objects grant or widen
// rights: written only by name, never as a kind.
var guarded = map[schema.GroupResource]bool{
	{Group: "rbac.authorization.k8s.io", Resource: "roles"}:        true,
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}: true,
}

// Name is the name of the Roles, bindings and ClusterRole of a release:
// unique per release identity, so two releases of one name in different
// namespaces or environments never overwrite each other's.
func Name(rel *render.Release) string { return "opm-" + rel.Name + "-" + rel.ReleaseID }

// For returns the Roles, RoleBindings and, when the release renders
// cluster-scoped objects, the ClusterRole and ClusterRoleBinding that
// release rel needs as the identity user (with groups). Kinds become
// resources through mapper (the cluster's RESTMapper); rel's objects must
// already have the scope the cluster gives them, and lie within the
// environment's reach (engine/scope.Resolve and Check).
//
// Least privilege: namespaced kinds are granted in exactly the namespaces
// the release writes; cluster-scoped kinds (Namespaces, ClusterRoles,
// CRDs, …) and RBAC kinds only by name, the names the release renders.
func For(mapper meta.RESTMapper, rel *render.Release, user string, groups []string) ([]runtime.Object, error) {
	if user == "" {
		return nil, fmt.Errorf("release %s: the environment impersonates no identity (cluster.impersonate), so there is nobody to grant rights to", rel.Name)
	}
	perNS := map[string]map[schema.GroupResource]bool{}
	namedNS := map[string]map[schema.GroupResource][]string{}
	cluster := map[schema.GroupResource][]string{}
	for _, res := range rel.Resources {
		gvk := res.Object.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("release %s: %s %s: the cluster does not serve this kind: %w", rel.Name, gvk.Kind, res.Object.GetName(), err)
		}
		gr := m.Resource.GroupResource()
		name := res.Object.GetName()
		ns := res.Object.GetNamespace()
		if m.Scope.Name() == meta.RESTScopeNameRoot {
			if why := rel.Reach.Check(res, rel.Namespace); why != "" {
				return nil, fmt.Errorf("release %s %s", rel.Name, why)
			}
			cluster[gr] = append(cluster[gr], name)
			continue
		}
		if ns == "" {
			ns = rel.Namespace
		}
		if !rel.Reach.Allows(ns) {
			return nil, fmt.Errorf("release %s writes %s %s into namespace %q, which environment %q does not allow", rel.Name, gvk.Kind, name, ns, rel.Reach.Environment)
		}
		if guarded[gr] {
			if namedNS[ns] == nil {
				namedNS[ns] = map[schema.GroupResource][]string{}
			}
			namedNS[ns][gr] = append(namedNS[ns][gr], name)
		}
		if perNS[ns] == nil {
			perNS[ns] = map[schema.GroupResource]bool{}
		}
		perNS[ns][gr] = true
	}
	name := Name(rel)
	labels := map[string]string{"app.kubernetes.io/managed-by": "opm", "module-release.opmodel.dev/name": rel.Name, "module-release.opmodel.dev/uuid": rel.ReleaseID}
	subjects := subjectsFor(user, groups)
	var out []runtime.Object
	namespaces := []string{rel.Namespace}
	for ns := range perNS {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	slices.Sort(namespaces)
	record := inventory.SecretName(rel.Name, rel.ReleaseID)
	for _, ns := range namespaces {
		var rules []rbacv1.PolicyRule
		open := map[schema.GroupResource]bool{}
		for gr := range perNS[ns] {
			if !guarded[gr] {
				open[gr] = true
			}
		}
		rules = append(rules, rulesFor(open, manage(), nil)...)
		if hasWorkload(perNS[ns]) {
			// Read only: an unhealthy workload is explained by its pods
			// (ImagePullBackOff, CrashLoopBackOff, Unschedulable).
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
		}
		for _, gr := range sortedResources(namedNS[ns]) {
			// Read as a kind (the ghost scan lists it), written by name.
			rules = append(rules,
				rbacv1.PolicyRule{APIGroups: []string{gr.Group}, Resources: []string{gr.Resource}, Verbs: []string{"list"}},
				rbacv1.PolicyRule{APIGroups: []string{gr.Group}, Resources: []string{gr.Resource}, ResourceNames: sortedNames(namedNS[ns][gr]), Verbs: named()})
		}
		if ns == rel.Namespace {
			// The inventory Secret and the lock's Lease share one name.
			rules = append(rules,
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{record}, Verbs: []string{"get", "update", "delete"}},
				rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{record}, Verbs: []string{"get", "update", "delete"}},
				// create cannot be limited to a name: RBAC authorises a POST
				// before the name is known.
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
				rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				// The inventory is found by its labels when its name is of an
				// older convention: a LIST of the namespace's Secrets.
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}},
			)
		}
		meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
		out = append(out,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta, Rules: dedupe(rules)},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta,
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subjects})
	}
	if len(cluster) > 0 {
		var rules []rbacv1.PolicyRule
		for _, gr := range sortedResources(cluster) {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{gr.Group}, Resources: []string{gr.Resource}, ResourceNames: sortedNames(cluster[gr]), Verbs: named()})
		}
		meta := metav1.ObjectMeta{Name: name, Labels: labels}
		out = append(out,
			&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta, Rules: rules},
			&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: meta,
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, Subjects: subjects})
	}
	return out, nil
}

func sortedResources[V any](m map[schema.GroupResource]V) []schema.GroupResource {
	out := make([]schema.GroupResource, 0, len(m))
	for gr := range m {
		out = append(out, gr)
	}
	slices.SortFunc(out, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func sortedNames(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// dedupe drops rules that repeat an earlier one.
func dedupe(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if !slices.ContainsFunc(out, func(o rbacv1.PolicyRule) bool { return fmt.Sprint(o) == fmt.Sprint(r) }) {
			out = append(out, r)
		}
	}
	return out
}

// rulesFor is one rule per API group, its resources sorted.
func rulesFor(grs map[schema.GroupResource]bool, verbs, names []string) []rbacv1.PolicyRule {
	byGroup := map[string][]string{}
	for gr := range grs {
		byGroup[gr.Group] = append(byGroup[gr.Group], gr.Resource)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	rules := make([]rbacv1.PolicyRule, 0, len(groups))
	for _, g := range groups {
		res := byGroup[g]
		slices.Sort(res)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, ResourceNames: names, Verbs: verbs})
	}
	return rules
}

// subjectsFor binds a ServiceAccount as such, anyone else as a User.
func subjectsFor(user string, _ []string) []rbacv1.Subject {
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}
		}
	}
	return []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}
}

// Bootstrap returns what an administrator creates before rights: the
// Namespaces the Roles of rights are in, then the ServiceAccount user is
// (when it is one), in the order `kubectl apply -f -` needs them.
func Bootstrap(rights []runtime.Object, user string) []runtime.Object {
	var out []runtime.Object
	var namespaces []string
	for _, o := range rights {
		if r, ok := o.(*rbacv1.Role); ok && !slices.Contains(namespaces, r.Namespace) {
			namespaces = append(namespaces, r.Namespace)
		}
	}
	for _, ns := range namespaces {
		out = append(out, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			out = append(out, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		}
	}
	return out
}

// hasWorkload reports whether a namespace's resources include a kind that
// runs pods.
func hasWorkload[V any](resources map[schema.GroupResource]V) bool {
	for gr := range resources {
		switch gr {
		case schema.GroupResource{Group: "apps", Resource: "deployments"}, schema.GroupResource{Group: "apps", Resource: "statefulsets"},
			schema.GroupResource{Group: "apps", Resource: "daemonsets"}, schema.GroupResource{Group: "apps", Resource: "replicasets"},
			schema.GroupResource{Group: "batch", Resource: "jobs"}:
			return true
		}
	}
	return false
}
