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

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/render"
)

// manage is what opm does with the objects it owns: server-side apply
// (get, create, patch), diff and status (get, list, watch), prune and
// delete.
func manage() []string {
	return []string{"get", "list", "watch", "create", "update", "patch", "delete"}
}

// For returns the Roles, RoleBindings and, when the release renders
// cluster-scoped objects, the ClusterRole and ClusterRoleBinding that
// release rel needs as the identity user (with groups). Kinds become
// resources through mapper (the cluster's RESTMapper).
func For(mapper meta.RESTMapper, rel *render.Release, user string, groups []string) ([]runtime.Object, error) {
	if user == "" {
		return nil, fmt.Errorf("release %s: the environment impersonates no identity (cluster.impersonate), so there is nobody to grant rights to", rel.Name)
	}
	perNS := map[string]map[schema.GroupResource]bool{}
	cluster := map[schema.GroupResource]bool{}
	for _, res := range rel.Resources {
		gvk := res.Object.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("release %s: %s %s: the cluster does not serve this kind: %w", rel.Name, gvk.Kind, res.Object.GetName(), err)
		}
		gr := m.Resource.GroupResource()
		if m.Scope.Name() == meta.RESTScopeNameRoot {
			cluster[gr] = true
			continue
		}
		ns := res.Object.GetNamespace()
		if ns == "" {
			ns = rel.Namespace
		}
		if perNS[ns] == nil {
			perNS[ns] = map[schema.GroupResource]bool{}
		}
		perNS[ns][gr] = true
	}
	name := "opm-" + rel.Name
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
		rules := rulesFor(perNS[ns])
		if ns == rel.Namespace {
			// The inventory Secret and the lock's Lease share one name.
			rules = append(rules,
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{record}, Verbs: []string{"get", "update", "patch", "delete"}},
				rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{record}, Verbs: []string{"get", "update", "delete"}},
				// create cannot be limited to a name: RBAC authorises it before the name is known.
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
				rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			)
		}
		meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "opm", "module-release.opmodel.dev/name": rel.Name}}
		out = append(out,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta, Rules: rules},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta,
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subjects})
	}
	if len(cluster) > 0 {
		cname := name + "-" + rel.Namespace
		meta := metav1.ObjectMeta{Name: cname, Labels: map[string]string{"app.kubernetes.io/managed-by": "opm", "module-release.opmodel.dev/name": rel.Name}}
		out = append(out,
			&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta, Rules: rulesFor(cluster)},
			&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: meta,
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cname}, Subjects: subjects})
	}
	return out, nil
}

// rulesFor is one rule per API group, its resources sorted.
func rulesFor(grs map[schema.GroupResource]bool) []rbacv1.PolicyRule {
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
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, Verbs: manage()})
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
