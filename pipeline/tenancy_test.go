package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// tenantDir writes a deployment whose environment "tenant" (body envBody,
// namespace ns) deploys release "tools": raw objects (core.#Objects), with
// releaseBody added to the release as a tenant would write it.
func tenantDir(t *testing.T, ns, envBody, releaseBody, objects string) string {
	t.Helper()
	return deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

environments: tenant: core.#Environment & {
	metadata: name: "tenant"
	namespace: %q
	%s
}

releases: tools: core.#ModuleRelease & {
	metadata: name: "tools"
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/tenancy/tools@v0", name: "tools", version: "0.1.0"}
		#config: {}
		#components: raw: {
			core.#Objects
			spec: objects: [%s]
		}
	}
	%s
}
`, ns, envBody, objects, releaseBody)})
}

// grants are the questions asked before and after each attack: what would
// let the identity out of its namespace.
func grants(t *testing.T, cs kubernetes.Interface, user string, groups []string, ns string) string {
	t.Helper()
	var out []string
	for _, q := range [][5]string{
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"create", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"delete", "", "namespaces", "", "default"},
		{"patch", "", "namespaces", "", "kube-system"},
		{"create", "", "configmaps", "kube-system", ""},
		{"get", "", "secrets", "default", ""},
		{"create", "apiextensions.k8s.io", "customresourcedefinitions", "", ""},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""},
	} {
		out = append(out, fmt.Sprintf("%s %s/%s %s/%s: %v", q[0], q[1], q[2], q[3], q[4], kubetest.CanI(t, cs, user, groups, q[0], q[1], q[2], q[3], q[4])))
	}
	_ = ns
	return strings.Join(out, "\n")
}

// A release that unifies more policy into its #environment — cluster-
// scoped objects where the environment left the default, or the
// system:masters group beside the impersonated user — is refused with
// the line it does that on, before anything is written; the identity's
// rights are the same after as before.
func TestAReleaseCannotWidenItsEnvironment(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	crb := `{apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: name: "tools-admin-` + ns + `", roleRef: {apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin"}, subjects: [{kind: "User", name: "alice", apiGroup: "rbac.authorization.k8s.io"}]}`
	cm := `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}`
	before := grants(t, cs, "alice", nil, ns)
	for name, c := range map[string]struct{ release, objects, field string }{
		"cluster-scoped objects":   {`#environment: namespaces: clusterScoped: true`, crb, "namespaces.clusterScoped"},
		"the system:masters group": {`#environment: cluster: impersonate: groups: ["system:masters"]`, cm, "cluster.impersonate"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := tenantDir(t, ns, `cluster: impersonate: user: "alice"`, c.release, c.objects)
			opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "tenant"}, ClusterOptions: cluster(t)}
			_, err := pipeline.Apply(t.Context(), opts)
			assert.Assert(t, err != nil, "applied")
			assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
			assert.Check(t, is.Contains(err.Error(), `release "tools" sets #environment.`+c.field+` (at `))
			assert.Check(t, is.Contains(err.Error(), "deploy.cue:"))
			_, err = pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: opts.Selection, ClusterOptions: opts.ClusterOptions})
			assert.Assert(t, err != nil, "opm rbac granted what the release asked for")
		})
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Get(t.Context(), "tools-admin-"+ns, metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "the binding was written: %v", err)
	_, err = cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "tools", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "the ConfigMap was written: %v", err)
	assert.Equal(t, grants(t, cs, "alice", nil, ns), before)
}

// A cluster-scoped kind the catalog's table does not know (a custom
// resource whose CRD was installed apart from the release) renders
// namespaced; the cluster says otherwise, and apply, diff and rbac refuse
// it (exit 2) instead of creating it cluster-wide.
func TestClusterScopedKindOutsideTheTableIsRefused(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	ext, err := apiextensions.NewForConfig(env.Config())
	assert.NilError(t, err)
	group := "tenancy-" + ns + ".test.example"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}}},
		},
	}
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
	assert.NilError(t, err)
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	eventually(t, time.Minute, func() string {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return ""
			}
		}
		return "the CRD is not established"
	})
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	widget := `{apiVersion: "` + group + `/v1", kind: "Widget", metadata: name: "w-` + ns + `"}`
	dir := tenantDir(t, ns, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/tenant"`, ns), "", widget)
	sel := pipeline.Selection{Dir: dir, Environment: "tenant"}
	eventually(t, time.Minute, func() string {
		// The discovery cache of a fresh client sees the new kind.
		_, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: cluster(t)})
		if err == nil || !strings.Contains(err.Error(), "cluster-scoped") {
			return fmt.Sprintf("diff: %v", err)
		}
		return ""
	})
	for name, run := range map[string]func() error{
		"apply": func() error {
			_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
			return err
		},
		"rbac": func() error {
			_, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: sel, ClusterOptions: cluster(t)})
			return err
		},
	} {
		err := run()
		assert.Assert(t, err != nil, "%s accepted it", name)
		assert.Equal(t, fault.KindOf(err), fault.Validation, "%s: %v", name, err)
		assert.Check(t, is.Contains(err.Error(), "the cluster serves Widget as cluster-scoped, so applying it would drop the namespace"), name)
		assert.Check(t, is.Contains(err.Error(), `environment "tenant" does not allow`), name)
	}
	dyn, err := dynamic.NewForConfig(env.Config())
	assert.NilError(t, err)
	list, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).List(t.Context(), metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Items), 0, "a Widget was created cluster-wide")
}

func ptr[T any](v T) *T { return &v }

// What `opm rbac` prints for a release that renders its own Namespace and
// a ConfigMap: the namespace by name only, exactly the verbs the pipeline
// uses, list on Secrets for the inventory, names unique per release. As
// that ServiceAccount the release applies (the first time too, with no
// Secret of its own); it may not delete or relabel another namespace,
// nor create cluster-wide RBAC.
func TestRBACIsLeastPrivilege(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	user := "system:serviceaccount:" + ns + ":tenant"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	objects := `{apiVersion: "v1", kind: "Namespace", metadata: name: "` + ns + `"}, {apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}`
	dir := tenantDir(t, ns, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/tenant"`, ns), "", objects)
	sel := pipeline.Selection{Dir: dir, Environment: "tenant"}
	before := grants(t, cs, user, groups, ns)

	rb, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	objs := rb.Releases[0].Objects
	var clusterRules []rbacv1.PolicyRule
	for _, o := range objs {
		name := o["metadata"].(map[string]any)["name"].(string)
		assert.Check(t, strings.HasPrefix(name, "opm-tools-") && len(name) > len("opm-tools-")+30, "%s is not unique per release identity", name)
		if o["kind"] == "ClusterRole" {
			var cr rbacv1.ClusterRole
			assert.NilError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, &cr))
			clusterRules = cr.Rules
		}
		err = createAsAdmin(t, o)
		assert.NilError(t, err)
	}
	kubetest.WaitUntilAllowed(t, cs, user, groups, "list", "", "secrets", ns, "")
	kubetest.WaitUntilAllowed(t, cs, user, groups, "patch", "", "namespaces", "", ns)
	assert.DeepEqual(t, clusterRules, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{ns}, Verbs: []string{"get", "patch", "create", "delete"}}})

	// The namespace exists (the platform team made it): the release adopts it.
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t), Adopt: true})
	assert.NilError(t, err, "as the tenant, with what opm rbac granted")
	assert.Equal(t, res.Releases[0].Error, "")
	_, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)

	assert.Equal(t, grants(t, cs, user, groups, ns), before, "nothing outside the tenant's namespace was granted")
	assert.Check(t, kubetest.CanI(t, cs, user, groups, "list", "", "secrets", ns, ""), "the inventory lookup lists Secrets")
	assert.Check(t, !kubetest.CanI(t, cs, user, groups, "update", "", "configmaps", ns, "tools"), "apply patches; nothing updates")
	assert.Check(t, kubetest.CanI(t, cs, user, groups, "patch", "", "namespaces", "", ns))
	assert.Check(t, !kubetest.CanI(t, cs, user, groups, "patch", "", "namespaces", "", "default"))

	// Another release of the same name, in another environment's
	// namespace: its rights have other names.
	other := env.Namespace(t)
	rb2, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: pipeline.Selection{
		Dir: tenantDir(t, other, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/tenant"`, other), "", strings.ReplaceAll(objects, ns, other)), Environment: "tenant"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Assert(t, rb2.Releases[0].Objects[0]["metadata"].(map[string]any)["name"] != objs[0]["metadata"].(map[string]any)["name"])
}

// A tenant who may create Secrets in its namespace plants an inventory
// there that names another namespace's release and records its objects.
// `opm delete --name` in the tenant's namespace refuses it and deletes
// nothing; the other release's objects are all still there.
func TestPlantedInventoryCannotReachAnotherNamespace(t *testing.T) {
	teamA, teamB := env.Namespace(t), env.Namespace(t)
	cs := clientset(t)
	objects := `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}, {apiVersion: "v1", kind: "Secret", metadata: name: "tools", stringData: a: "b"}`
	dirB := tenantDir(t, teamB, "", "", objects)
	_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dirB, Environment: "tenant"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	invs, err := cs.CoreV1().Secrets(teamB).List(t.Context(), metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentInventory})
	assert.NilError(t, err)
	assert.Equal(t, len(invs.Items), 1)

	for name, edit := range map[string]func(s *corev1.Secret){
		"as it is": func(*corev1.Secret) {},
		"its metadata claiming team-a": func(s *corev1.Secret) {
			s.Data["metadata"] = []byte(strings.ReplaceAll(string(s.Data["metadata"]), teamB, teamA))
		},
		"renamed to the tenant's own id": func(s *corev1.Secret) { s.Name = "opm.tools.00000000-0000-0000-0000-000000000000" },
	} {
		t.Run(name, func(t *testing.T) {
			planted := invs.Items[0].DeepCopy()
			planted.ObjectMeta = metav1.ObjectMeta{Name: planted.Name, Namespace: teamA, Labels: planted.Labels}
			edit(planted)
			_, err := cs.CoreV1().Secrets(teamA).Create(t.Context(), planted, metav1.CreateOptions{})
			assert.NilError(t, err)
			t.Cleanup(func() {
				_ = cs.CoreV1().Secrets(teamA).Delete(context.Background(), planted.Name, metav1.DeleteOptions{})
			})

			_, err = pipeline.Delete(t.Context(), pipeline.DeleteOptions{Target: pipeline.Target{Name: "tools", Namespace: teamA}, ClusterOptions: cluster(t)})
			assert.Assert(t, err != nil, "deleted by a planted inventory")
			assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
			assert.Check(t, is.Contains(err.Error(), "inventory Secret "+teamA+"/"+planted.Name))
			_, err = cs.CoreV1().ConfigMaps(teamB).Get(t.Context(), "tools", metav1.GetOptions{})
			assert.NilError(t, err, "team-b's ConfigMap")
			_, err = cs.CoreV1().Secrets(teamB).Get(t.Context(), "tools", metav1.GetOptions{})
			assert.NilError(t, err, "team-b's Secret")
		})
	}
}

// With --env, a release selected by name runs as the environment's
// identity: a tenant without rights is refused by the API server, and
// nothing is deleted.
func TestDeleteByNameRunsAsTheEnvironmentsIdentity(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	objects := `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}`
	admin := tenantDir(t, ns, "", "", objects)
	_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: admin, Environment: "tenant"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	impersonating := tenantDir(t, ns, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/tenant"`, ns), "", objects)
	_, err = pipeline.Delete(t.Context(), pipeline.DeleteOptions{
		Target:         pipeline.Target{Selection: pipeline.Selection{Dir: impersonating, Environment: "tenant"}, Name: "tools", Namespace: ns},
		ClusterOptions: cluster(t)})
	assert.Assert(t, err != nil, "deleted with the kubeconfig's own rights")
	assert.Equal(t, fault.KindOf(err), fault.Permission, "%v", err)
	assert.Check(t, is.Contains(err.Error(), "system:serviceaccount:"+ns+":tenant"))
	_, err = cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "tools", metav1.GetOptions{})
	assert.NilError(t, err, "the ConfigMap is still there")
}

// On a fresh cluster `opm rbac --bootstrap` puts the Namespace and the
// ServiceAccount first: applied in its order by an administrator, every
// object is accepted, and the release then applies as the tenant.
func TestRBACBootstrapOnAFreshNamespace(t *testing.T) {
	cs := clientset(t)
	ns := env.Namespace(t) + "-fresh"
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	dir := tenantDir(t, ns, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/deployer"`, ns), "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}`)
	sel := pipeline.Selection{Dir: dir, Environment: "tenant"}
	rb, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: sel, ClusterOptions: cluster(t), Bootstrap: true})
	assert.NilError(t, err)
	var kinds []string
	for _, o := range rb.Releases[0].Objects {
		kinds = append(kinds, o["kind"].(string))
		err = createAsAdmin(t, o)
		assert.NilError(t, err, "applying %s in the order printed", o["kind"])
	}
	assert.DeepEqual(t, kinds, []string{"Namespace", "ServiceAccount", "Role", "RoleBinding"})
	kubetest.WaitUntilAllowed(t, cs, "system:serviceaccount:"+ns+":deployer", []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, "list", "", "secrets", ns, "")
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err, "as the tenant")
}

// createAsAdmin creates an object `opm rbac` printed, as an administrator
// applying it would; cluster-wide ones are removed when the test ends.
func createAsAdmin(t *testing.T, o map[string]any) error {
	t.Helper()
	gvr, ok := map[string]schema.GroupVersionResource{
		"Namespace":          {Version: "v1", Resource: "namespaces"},
		"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
		"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	}[o["kind"].(string)]
	assert.Assert(t, ok, "opm rbac printed a %v", o["kind"])
	dyn, err := dynamic.NewForConfig(env.Config())
	assert.NilError(t, err)
	u := &unstructured.Unstructured{Object: o}
	if ns := u.GetNamespace(); ns != "" {
		_, err = dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
		return err
	}
	_, err = dyn.Resource(gvr).Create(t.Context(), u, metav1.CreateOptions{})
	t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	return err
}

// An unhealthy workload's pod-level reason reaches a tenant who holds only
// what `opm rbac` grants: list on the namespace's pods, nothing more.
func TestPodReasonsUnderTheEnvironmentsIdentity(t *testing.T) {
	cs := clientset(t)
	ns := env.Namespace(t) + "-pods"
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	deployment := fmt.Sprintf(`{apiVersion: "apps/v1", kind: "Deployment", metadata: name: "web", spec: {replicas: 1, selector: matchLabels: app: "web", template: {metadata: labels: app: "web", spec: containers: [{name: "web", image: %q}]}}}`, kubetest.FailingImage)
	dir := tenantDir(t, ns, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/deployer"`, ns), "", deployment)
	sel := pipeline.Selection{Dir: dir, Environment: "tenant"}
	rb, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: sel, ClusterOptions: cluster(t), Bootstrap: true})
	assert.NilError(t, err)
	for _, o := range rb.Releases[0].Objects {
		assert.NilError(t, createAsAdmin(t, o))
	}
	user := "system:serviceaccount:" + ns + ":deployer"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	kubetest.WaitUntilAllowed(t, cs, user, groups, "list", "", "pods", ns, "")
	assert.Check(t, !kubetest.CanI(t, cs, user, groups, "delete", "", "pods", ns, ""), "reading pods is all")
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err, "as the tenant")
	kubetest.WaitForPodReason(t, cs, ns, "ImagePullBackOff")
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Assert(t, !st.Healthy)
	reason := st.Releases[0].Components[0].Objects[0].Reason
	assert.Check(t, strings.HasPrefix(reason, "ImagePullBackOff: Back-off pulling image"), reason)
}

// A tenant who may write Secrets in its own namespace edits its release's
// inventory to record another team's ConfigMap and Secret. Diff, status,
// apply and delete of its deployment directory (an environment without
// impersonation, so RBAC does not stop them) read only what the
// environment may touch: the other team's objects are neither read,
// listed as stale nor deleted, and each command says what it left alone.
func TestPlantedEntriesOutsideTheEnvironmentAreNotRead(t *testing.T) {
	teamA, teamB := env.Namespace(t), env.Namespace(t)
	cs := clientset(t)
	theirs := `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}, {apiVersion: "v1", kind: "Secret", metadata: name: "tools", stringData: a: "b"}`
	_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: tenantDir(t, teamB, "", "", theirs), Environment: "tenant"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	sel := pipeline.Selection{Dir: tenantDir(t, teamA, "", "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "mine", data: a: "b"}`), Environment: "tenant"}
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)

	plantEntries(t, cs, teamA, false,
		inventory.Entry{ID: manifest.ID{Kind: "ConfigMap", Namespace: teamB, Name: "tools"}, V: "v1", Component: "raw"},
		inventory.Entry{ID: manifest.ID{Kind: "Secret", Namespace: teamB, Name: "tools"}, V: "v1", Component: "raw"})
	outside := "records ConfigMap/" + teamB + "/tools, Secret/" + teamB + "/tools outside where the environment may write"

	d, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	for _, o := range d.Releases[0].Objects {
		assert.Check(t, o.Ref.Namespace != teamB, "diff read %s/%s", o.Ref.Namespace, o.Ref.Name)
	}
	assert.Check(t, is.Contains(strings.Join(d.Releases[0].Warnings, "\n"), outside))

	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	for _, comp := range st.Releases[0].Components {
		for _, o := range comp.Objects {
			assert.Check(t, o.Namespace != teamB, "status read %s/%s", o.Namespace, o.Name)
		}
	}
	assert.Check(t, is.Contains(strings.Join(st.Releases[0].Warnings, "\n"), outside))

	// A change that drops "mine" makes everything recorded stale: only
	// what the environment may touch is pruned, and the new record holds
	// only that.
	sel.Dir = tenantDir(t, teamA, "", "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "other", data: a: "b"}`)
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	for _, o := range append(res.Releases[0].Stale, res.Releases[0].Skipped...) {
		assert.Check(t, o.Namespace != teamB, "apply read %s/%s", o.Namespace, o.Name)
	}
	assert.Check(t, is.Contains(strings.Join(res.Releases[0].Warnings, "\n"), outside))
	del, err := pipeline.Delete(t.Context(), pipeline.DeleteOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	for _, o := range del.Releases[0].Objects {
		assert.Check(t, o.Namespace != teamB, "delete read %s/%s", o.Namespace, o.Name)
	}
	_, err = cs.CoreV1().ConfigMaps(teamB).Get(t.Context(), "tools", metav1.GetOptions{})
	assert.NilError(t, err, "team-b's ConfigMap")
	_, err = cs.CoreV1().Secrets(teamB).Get(t.Context(), "tools", metav1.GetOptions{})
	assert.NilError(t, err, "team-b's Secret")
}

// Someone who can write the cache forges the identity a tenant's status
// reads from it: another team's namespace and release ID, and (in the
// format it had) no impersonation. The cache holds where a release is,
// never who it acts as or where it may write: status runs as the
// environment's identity, read from the directory, answers for the
// tenant's own release, and reads nothing of the other team's.
func TestForgedIdentityCannotChangeWhomStatusRunsAs(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	t.Setenv(pipeline.EnvVerifySkips, "") // as a CI job runs it
	cs := clientset(t)
	teamA, teamB := env.Namespace(t), env.Namespace(t)
	theirs, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{
		Dir: tenantDir(t, teamB, "", "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "theirs", data: a: "b"}`), Environment: "tenant"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)

	dir := tenantDir(t, teamA, fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/deployer"`, teamA), "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "mine", data: a: "b"}`)
	sel := pipeline.Selection{Dir: dir, Environment: "tenant"}
	rb, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: sel, ClusterOptions: cluster(t), Bootstrap: true})
	assert.NilError(t, err)
	for _, o := range rb.Releases[0].Objects {
		if o["kind"] != "Namespace" {
			assert.NilError(t, createAsAdmin(t, o))
		}
	}
	user := "system:serviceaccount:" + teamA + ":deployer"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + teamA, "system:authenticated"}
	kubetest.WaitUntilAllowed(t, cs, user, groups, "list", "", "secrets", teamA, "")
	assert.Assert(t, !kubetest.CanI(t, cs, user, groups, "list", "", "configmaps", teamB, ""), "the tenant cannot read team-b")
	mine, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err, "as the tenant")

	_, c := latestChange(t, mine.Releases[0])
	body, ok := pipeline.CachedIdentity(os.Getenv("OPM_CACHE_DIR"), c.Inputs)
	assert.Assert(t, ok, "the apply cached the identity")
	forged := strings.ReplaceAll(strings.ReplaceAll(body, mine.Releases[0].ReleaseID, theirs.Releases[0].ReleaseID), teamA, teamB)
	assert.NilError(t, pipeline.ForgeIdentity(os.Getenv("OPM_CACHE_DIR"), c.Inputs, forged))

	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Equal(t, st.Releases[0].Namespace, teamA)
	assert.Equal(t, st.Releases[0].ReleaseID, mine.Releases[0].ReleaseID)
	for _, comp := range st.Releases[0].Components {
		for _, o := range comp.Objects {
			assert.Check(t, o.Namespace != teamB, "status read %s/%s with another identity", o.Namespace, o.Name)
		}
	}
	assert.Assert(t, !kubetest.CanI(t, cs, user, groups, "list", "", "configmaps", teamB, ""), "after: the tenant still cannot read team-b")
}

// A tenant who may write its own inventory Secret records another team's
// ConfigMap in its newest change, with the resourceVersion it guesses, and
// re-seals the change: were the recorded entries read before they are
// checked against the reach, diff's fast path would say "inputs identical"
// exactly when the guess is right — an existence and resourceVersion
// oracle on a namespace the tenant cannot read. Diff takes the full path,
// reads nothing there, and says what it left alone.
func TestDiffFastPathChecksRecordedEntriesAgainstTheReach(t *testing.T) {
	teamA, teamB := env.Namespace(t), env.Namespace(t)
	cs := clientset(t)
	_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{
		Dir: tenantDir(t, teamB, "", "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "theirs", data: a: "b"}`), Environment: "tenant"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	theirs, err := cs.CoreV1().ConfigMaps(teamB).Get(t.Context(), "theirs", metav1.GetOptions{})
	assert.NilError(t, err)

	sel := pipeline.Selection{Dir: tenantDir(t, teamA, "", "", `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "mine", data: a: "b"}`), Environment: "tenant"}
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	d, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Assert(t, d.Releases[0].InputsIdentical, "the fast path is taken before the edit")

	// The seal is a digest anyone can recompute.
	plantEntries(t, cs, teamA, true, inventory.Entry{ID: manifest.ID{Kind: "ConfigMap", Namespace: teamB, Name: "theirs"},
		V: "v1", Component: "raw", Applied: &inventory.Applied{RV: theirs.ResourceVersion}})

	d, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Assert(t, !d.Releases[0].InputsIdentical, "the fast path answered from entries outside the reach")
	for _, o := range d.Releases[0].Objects {
		assert.Check(t, o.Ref.Namespace != teamB, "diff read %s/%s", o.Ref.Namespace, o.Ref.Name)
	}
	assert.Check(t, is.Contains(strings.Join(d.Releases[0].Warnings, "\n"), "records ConfigMap/"+teamB+"/theirs outside where the environment may write"))
}

// plantEntries adds entries to the newest change of the one inventory in
// ns, as a tenant who may write Secrets there can; reseal recomputes the
// change's entries digest.
func plantEntries(t *testing.T, cs kubernetes.Interface, ns string, reseal bool, entries ...inventory.Entry) {
	t.Helper()
	invs, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentInventory})
	assert.NilError(t, err)
	assert.Equal(t, len(invs.Items), 1)
	inv, err := inventory.Decode(&invs.Items[0])
	assert.NilError(t, err)
	id, c, _ := inv.Latest()
	c.Inventory.Entries = append(c.Inventory.Entries, entries...)
	if reseal {
		c.Seal()
	}
	inv.Changes[id] = c
	planted, err := inv.Encode()
	assert.NilError(t, err)
	planted.ResourceVersion = invs.Items[0].ResourceVersion
	_, err = cs.CoreV1().Secrets(ns).Update(t.Context(), planted, metav1.UpdateOptions{})
	assert.NilError(t, err)
}
