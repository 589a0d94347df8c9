package pipeline_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// An environment that impersonates a tenant's ServiceAccount applies as
// that account: without RBAC the API server refuses before anything is
// written (exit 4, naming the identity); with what `opm rbac` prints for
// it, the same apply (and diff) succeeds, and nothing more is granted.
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

	// What `opm rbac` prints, applied by an administrator: exactly what the
	// release renders, its inventory Secret and its Lease.
	rb, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: opts.Selection, ClusterOptions: opts.ClusterOptions})
	assert.NilError(t, err)
	assert.Equal(t, len(rb.Releases), 1)
	assert.Equal(t, rb.Releases[0].Identity, "system:serviceaccount:"+ns+":tenant")
	var kinds []string
	for _, o := range rb.Releases[0].Objects {
		kinds = append(kinds, o["kind"].(string))
		switch o["kind"] {
		case "Role":
			var role rbacv1.Role
			assert.NilError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, &role))
			_, err = cs.RbacV1().Roles(ns).Create(t.Context(), &role, metav1.CreateOptions{})
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			assert.NilError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, &rb))
			_, err = cs.RbacV1().RoleBindings(ns).Create(t.Context(), &rb, metav1.CreateOptions{})
		}
		assert.NilError(t, err)
	}
	assert.DeepEqual(t, kinds, []string{"Role", "RoleBinding"}) // nothing cluster-scoped
	kubetest.WaitUntilAllowed(t, cs, "system:serviceaccount:"+ns+":tenant", []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, "list", "", "secrets", ns, "")

	res, err = pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Equal(t, res.Releases[0].Error, "")
	_, err = cs.AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	assert.NilError(t, err)

	// The tenant diffs its release too; and the Role grants nothing else.
	_, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: opts.Selection, ClusterOptions: opts.ClusterOptions, NoGhosts: true})
	assert.NilError(t, err)
	tenant := rest.CopyConfig(env.Config())
	tenant.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":tenant"}
	tc, err := kubernetes.NewForConfig(tenant)
	assert.NilError(t, err)
	_, err = tc.CoreV1().ConfigMaps("kube-system").List(t.Context(), metav1.ListOptions{})
	assert.Check(t, apierrors.IsForbidden(err), "outside its namespace: %v", err)
	_, err = tc.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	assert.Check(t, apierrors.IsForbidden(err), "a kind the release does not render: %v", err)

	// Whoever can write the inventory Secret (the tenant can) records an
	// object of another namespace as the release's: the next apply, as the
	// tenant, neither reads nor deletes it.
	victim, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "victim-"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	secrets, err = cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "opmodel.dev/component=inventory"})
	assert.NilError(t, err)
	assert.Equal(t, len(secrets.Items), 1)
	inv := secrets.Items[0]
	var index []string
	assert.NilError(t, json.Unmarshal(inv.Data["index"], &index))
	var change map[string]any
	assert.NilError(t, json.Unmarshal(inv.Data[index[0]], &change))
	entries := change["inventory"].(map[string]any)["entries"].([]any)
	change["inventory"].(map[string]any)["entries"] = append(entries, map[string]any{"group": "", "kind": "ConfigMap", "namespace": "default", "name": victim.Name, "v": "v1", "component": "web"})
	inv.Data[index[0]], err = json.Marshal(change)
	assert.NilError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Update(t.Context(), &inv, metav1.UpdateOptions{})
	assert.NilError(t, err)

	res, err = pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	// Beyond the environment's reach, it is not even tried: the warning
	// names it, and the new record leaves it out.
	assert.Check(t, is.Contains(strings.Join(res.Releases[0].Warnings, "\n"), "ConfigMap/default/"+victim.Name+" outside where the environment may write"))
	assert.Check(t, !strings.Contains(fmt.Sprint(res.Releases[0].Skipped), victim.Name), "tried to read %s", victim.Name)
	for _, p := range res.Releases[0].Pruned {
		assert.Check(t, p.Name != victim.Name, "pruned %v", p)
	}
	_, err = cs.CoreV1().ConfigMaps("default").Get(t.Context(), victim.Name, metav1.GetOptions{})
	assert.NilError(t, err, "the object outside the tenant's namespace is still there")
}

// A release that renders into kube-system: the namespace check refuses it
// at render; with the check widened on purpose, the API server refuses the
// tenant before anything is written.
func TestTenantCannotWriteIntoKubeSystem(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	deploy := func(allowed string) string {
		return deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: tenant: {
	namespace: %q
	namespaces: allowed: [%s]
	cluster: impersonate: serviceAccount: "%s/tenant"
}
releases: app: {#module: appmodule, metadata: namespace: "kube-system", values: {}}
`, ns, allowed, ns)})
	}
	sel := pipeline.Selection{Dir: deploy(fmt.Sprintf("%q", ns)), Environment: "tenant"}
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.Assert(t, err != nil)
	assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
	assert.Check(t, is.Contains(err.Error(), `into namespace "kube-system", which environment "tenant" does not allow`))

	sel.Dir = deploy(fmt.Sprintf("%q, %q", ns, "kube-system"))
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.Assert(t, err != nil, "the tenant wrote into kube-system")
	assert.Equal(t, fault.KindOf(err), fault.Permission, "%v", err)
	assert.Check(t, is.Contains(res.Releases[0].Error, "as system:serviceaccount:"+ns+":tenant"))
	_, err = cs.AppsV1().Deployments("kube-system").Get(t.Context(), "app", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "nothing applied: %v", err)
	secrets, err := cs.CoreV1().Secrets("kube-system").List(t.Context(), metav1.ListOptions{LabelSelector: "module-release.opmodel.dev/name=app"})
	assert.NilError(t, err)
	assert.Equal(t, len(secrets.Items), 0, "no inventory written")
}
