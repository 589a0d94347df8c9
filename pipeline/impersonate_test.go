package pipeline_test

import (
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// An environment that impersonates a tenant's ServiceAccount applies as
// that account: without RBAC the API server refuses before anything is
// written (exit 4, naming the identity); with the Role the release needs,
// the same apply succeeds.
func TestImpersonatedApplyIsGuardedByTheAPIServer(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	dir := deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: tenant: {
	namespace: %q
	cluster: impersonate: serviceAccount: "%s/tenant"
}
releases: app: {#module: appmodule, values: {}}
`, ns, ns)})
	opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "tenant"}, ClusterOptions: cluster(t)}

	res, err := pipeline.Apply(t.Context(), opts)
	assert.Assert(t, err != nil, "applied without any RBAC")
	assert.Equal(t, fault.KindOf(err), fault.Permission, "%v", err)
	msg := err.Error()
	if len(res.Releases) > 0 && res.Releases[0].Error != "" {
		msg = res.Releases[0].Error
	}
	assert.Check(t, is.Contains(msg, "as system:serviceaccount:"+ns+":tenant (the environment's cluster.impersonate)"))
	assert.Check(t, is.Contains(strings.ToLower(msg), "forbidden"))
	_, err = cs.AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "nothing applied: %v", err)
	secrets, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "opmodel.dev/component=inventory"})
	assert.NilError(t, err)
	assert.Equal(t, len(secrets.Items), 0, "no inventory written")

	// The Role a tenant needs for this release: its kinds, the inventory
	// Secret and the lock's Lease, in its namespace only.
	_, err = cs.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets", "services", "configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
		},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)

	res, err = pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Equal(t, res.Releases[0].Error, "")
	_, err = cs.AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	assert.NilError(t, err)
}
