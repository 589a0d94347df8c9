package reconcile

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/preview"
	"github.com/opmodel/pipeline/engine/render"
)

// crdRelease renders the Widget CRD and a ConfigMap; without the CRD
// (installCRDs: false in a chart) it renders the ConfigMap alone. A
// Widget in another namespace, another team's, is created directly.
func crdRelease(t *testing.T) (ns, group string, withCRD, withoutCRD *render.Release, teamWidget func() *unstructured.Unstructured) {
	t.Helper()
	ns = env.Namespace(t)
	team := env.Namespace(t) // another team's namespace
	group = ns + ".example.com"
	withCRD = direct(t, "certs", ns, crdDoc(group), configMapDoc(ns, "settings"))
	withoutCRD = direct(t, "certs", ns, configMapDoc(ns, "settings"))
	t.Cleanup(func() {
		_ = cluster(t).Dynamic.Resource(crdGVR).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})
	mustApply(t, withCRD, Options{})
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "team-a-widget", "namespace": team},
		"spec":     map[string]any{"size": int64(3)},
	}}
	_, err := cluster(t).Dynamic.Resource(gvr).Namespace(team).Create(t.Context(), w, metav1.CreateOptions{})
	assert.NilError(t, err)
	teamWidget = func() *unstructured.Unstructured {
		got, err := cluster(t).Dynamic.Resource(gvr).Namespace(team).Get(context.Background(), "team-a-widget", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return got
	}
	return ns, group, withCRD, withoutCRD, teamWidget
}

// A CRD that leaves the render is kept, with every custom resource of its
// kind, unless --prune-crds; apply says how many it still serves.
func TestCRDLeavingTheRenderIsKept(t *testing.T) {
	ns, group, _, v2, teamWidget := crdRelease(t)
	crd := "CustomResourceDefinition/widgets." + group

	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Stale), []string{"CustomResourceDefinition/widgets." + group})
	assert.DeepEqual(t, names(res.Skipped), []string{crd + "=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "--prune-crds"))
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "kept, with the 1 custom resource(s) it still serves cluster-wide"))
	assert.Assert(t, is.Contains(fmt.Sprint(res.Warnings), "CustomResourceDefinition.apiextensions.k8s.io/widgets."+group+" is no longer rendered: kept, with the 1 custom resource(s)"))
	assert.Equal(t, len(res.Pruned), 0)
	assert.Assert(t, teamWidget() != nil, "another team's custom resource survives")
	c := live(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group)
	assert.Assert(t, c != nil && c.GetDeletionTimestamp() == nil)
	assert.DeepEqual(t, secret(t, v2).latest(), []string{
		"ConfigMap/" + ns + "/settings@app", "CustomResourceDefinition//widgets." + group + "@app",
	}) // the kept CRD stays recorded

	// A dry run with the flag says what it would delete, and deletes nothing.
	res = mustApply(t, v2, Options{PruneCRDs: true, DryRun: true})
	assert.DeepEqual(t, names(res.Pruned), []string{crd + "=deleted"})
	assert.Assert(t, teamWidget() != nil)

	// Helm's keep annotation keeps it even with the flag.
	annotate(t, group, `{"metadata":{"annotations":{"helm.sh/resource-policy":"keep"}}}`)
	res = mustApply(t, v2, Options{PruneCRDs: true})
	assert.DeepEqual(t, names(res.Skipped), []string{crd + "=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, `its helm.sh/resource-policy annotation is "keep"`))
	assert.Assert(t, is.Contains(fmt.Sprint(res.Warnings), "helm.sh/resource-policy annotation"))
	assert.Assert(t, teamWidget() != nil)

	// Without the annotation, --prune-crds deletes it, and the record with it.
	annotate(t, group, `{"metadata":{"annotations":{"helm.sh/resource-policy":null}}}`)
	res = mustApply(t, v2, Options{PruneCRDs: true})
	assert.DeepEqual(t, names(res.Pruned), []string{crd + "=deleted"})
	assert.DeepEqual(t, secret(t, v2).latest(), []string{"ConfigMap/" + ns + "/settings@app"})
}

// opm's own annotation keeps any object, here a ConfigMap.
func TestKeepAnnotationKeepsAnyObject(t *testing.T) {
	ns := env.Namespace(t)
	v1 := direct(t, "app", ns, configMapDoc(ns, "kept"), configMapDoc(ns, "gone"), configMapDoc(ns, "stays"))
	mustApply(t, v1, Options{})
	_, err := cluster(t).Clientset.CoreV1().ConfigMaps(ns).Patch(t.Context(), "kept", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"opmodel.dev/resource-policy":"keep"}}}`), metav1.PatchOptions{})
	assert.NilError(t, err)
	v2 := direct(t, "app", ns, configMapDoc(ns, "stays"))
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/gone=deleted"})
	assert.DeepEqual(t, names(res.Skipped), []string{"ConfigMap/kept=skipped"})
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "kept") != nil)
	assert.DeepEqual(t, secret(t, v2).latest(), []string{"ConfigMap/" + ns + "/kept@app", "ConfigMap/" + ns + "/stays@app"})
}

// opm delete keeps CRDs (and what they serve) unless asked.
func TestDeleteKeepsCRDsUnlessAsked(t *testing.T) {
	ns, group, v1, _, teamWidget := crdRelease(t)
	crd := "CustomResourceDefinition/widgets." + group
	inv := mustRead(t, ns, v1.Name, v1.ReleaseID)
	res, err := Delete(t.Context(), cluster(t), v1, inv, inv.LatestEntries(), DeleteOptions{})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/settings=deleted"})
	assert.DeepEqual(t, names(res.Skipped), []string{crd + "=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "--prune-crds"))
	assert.Assert(t, teamWidget() != nil)
	assert.DeepEqual(t, secret(t, v1).latest(), []string{"CustomResourceDefinition//widgets." + group + "@app"})

	inv = mustRead(t, ns, v1.Name, v1.ReleaseID)
	res, err = Delete(t.Context(), cluster(t), v1, inv, inv.LatestEntries(), DeleteOptions{Options: Options{PruneCRDs: true}, Wait: true})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(res.Pruned), []string{crd + "=deleted"})
	assert.Assert(t, res.Inventory.Deleted)
	assert.Assert(t, teamWidget() == nil, "deleting the CRD deletes its custom resources: what the guard is for")
}

// With --force, an immutable change never re-creates a CRD (deleting its
// custom resources) unless --prune-crds.
func TestForceDoesNotRecreateACRD(t *testing.T) {
	_, group, v1, _, teamWidget := crdRelease(t)
	// The scope of a CRD cannot change.
	clusterScoped := direct(t, "certs", v1.Namespace, crdClusterScoped(group), configMapDoc(v1.Namespace, "settings"))
	res, err := Apply(t.Context(), cluster(t), clusterScoped, Options{Force: true})
	assert.Assert(t, err != nil)
	assert.Assert(t, is.Contains(err.Error(), "--force --prune-crds"), err.Error())
	assert.Equal(t, res.Counts.Recreated, 0)
	assert.Assert(t, teamWidget() != nil)
}

// crdClusterScoped is crdDoc's Widget CRD with the scope a CRD cannot
// change to.
func crdClusterScoped(group string) string {
	return strings.Replace(crdDoc(group), "scope: Namespaced", "scope: Cluster", 1)
}

func annotate(t *testing.T, group, patch string) {
	t.Helper()
	_, err := cluster(t).Dynamic.Resource(crdGVR).Patch(t.Context(), "widgets."+group, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	assert.NilError(t, err)
}

// An identity that may read the release's inventory and CRDs but not list
// the custom resources a stale CRD serves (another team's) still gets its
// diff, told that they could not be counted.
func TestDiffOfAStaleCRDWithoutRightsOnItsCustomResources(t *testing.T) {
	ns, _, _, v2, _ := crdRelease(t)
	admin := cluster(t).Clientset
	user := "crd-reader-" + ns
	_, err := admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)
	cl := impersonated(t, user, func(cl *kube.Cluster) error {
		_, err := cl.Clientset.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{})
		return err
	})

	res, err := preview.Release(t.Context(), cl, v2, preview.Options{})
	assert.NilError(t, err)
	var warning string
	for _, o := range res.Objects {
		if manifest.IsCRD(o.ID()) {
			warning = o.Warning
		}
	}
	assert.Assert(t, is.Contains(warning, "could not be counted"), warning)
}
