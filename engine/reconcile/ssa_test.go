package reconcile

// Behaviours fluxcd/pkg/ssa's own tests assert (ssa/manager_apply_test.go),
// held against opm's apply on the real API server. docs/migrating.md lists
// which of ssa's tests are ported here or elsewhere and which are not.

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/engine/manifest"
)

// A key renamed in a Secret's stringData leaves no old key (and no old
// secret value) behind: stringData is applied as data (ssa's
// normalize.normalizeSecret).
func TestRenamedStringDataKeyIsRemoved(t *testing.T) {
	ns := env.Namespace(t)
	secretDoc := func(key string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: NS}\nstringData: {%s: hunter2}\n", key)
	}
	mustApply(t, direct(t, "app", ns, secretDoc("password")), Options{})
	mustApply(t, direct(t, "app", ns, secretDoc("passphrase")), Options{})
	got := live(t, "v1", "Secret", ns, "creds").Object["data"]
	assert.DeepEqual(t, got, map[string]any{"passphrase": base64.StdEncoding.EncodeToString([]byte("hunter2"))})
	res := mustApply(t, direct(t, "app", ns, secretDoc("passphrase")), Options{})
	assert.Equal(t, res.Counts.Unchanged, 1, "the re-apply of stringData writes nothing")
}

// --force re-creates objects on the immutable-field refusals ssa
// recognises (a binding's roleRef, a StorageClass's parameters), and on
// nothing else: a value the API server refuses for another reason fails
// the apply with the object untouched.
func TestForceRecreatesOnEveryImmutableRefusal(t *testing.T) {
	ns := env.Namespace(t)
	suffix := ns[len(ns)-5:]
	binding := func(role string) string {
		return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: readers, namespace: NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %s}
subjects: [{kind: User, name: someone, apiGroup: rbac.authorization.k8s.io}]
`, role)
	}
	class := func(param string) string {
		return fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast-%s}
provisioner: example.com/disk
parameters: {type: %s}
`, suffix, param)
	}
	t.Cleanup(func() {
		_ = cluster(t).Clientset.StorageV1().StorageClasses().Delete(context.Background(), "fast-"+suffix, metav1.DeleteOptions{})
	})
	mustApply(t, direct(t, "app", ns, binding("view"), class("ssd")), Options{})
	oldBinding := live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "readers").GetUID()
	oldClass := live(t, "storage.k8s.io/v1", "StorageClass", "", "fast-"+suffix).GetUID()

	changed := direct(t, "app", ns, binding("edit"), class("nvme"))
	_, err := Apply(t.Context(), cluster(t), changed, Options{})
	assert.ErrorContains(t, err, "re-run with --force")
	assert.ErrorContains(t, err, "cannot change roleRef")
	// The plan stops at the first refused stage; the class comes later.
	_, err = Apply(t.Context(), cluster(t), direct(t, "app", ns, binding("view"), class("nvme")), Options{})
	assert.ErrorContains(t, err, "re-run with --force")
	assert.ErrorContains(t, err, "updates to parameters are forbidden")

	res := mustApply(t, changed, Options{Force: true})
	assert.Equal(t, res.Counts.Recreated, 2, "%+v", res.Applied)
	b := live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "readers")
	assert.Check(t, b.GetUID() != oldBinding)
	assert.Equal(t, b.Object["roleRef"].(map[string]any)["name"], "edit")
	c := live(t, "storage.k8s.io/v1", "StorageClass", "", "fast-"+suffix)
	assert.Check(t, c.GetUID() != oldClass)
	assert.Equal(t, c.Object["parameters"].(map[string]any)["type"], "nvme")

	// A refusal that is not about immutability is never a re-creation.
	bad := direct(t, "app", ns, binding("edit"), class("nvme"), `apiVersion: v1
kind: ConfigMap
metadata: {name: "Not_A_Name", namespace: NS}
`)
	_, err = Apply(t.Context(), cluster(t), bad, Options{Force: true})
	assert.ErrorContains(t, err, "Not_A_Name")
	assert.Check(t, !strings.Contains(err.Error(), "re-created"))
	assert.Equal(t, live(t, "storage.k8s.io/v1", "StorageClass", "", "fast-"+suffix).GetUID(), c.GetUID())
}

// A CEL transition rule's refusal ("Value is immutable") is an immutable
// field like the built-in ones.
func TestForceRecreatesOnCELImmutability(t *testing.T) {
	ns := env.Namespace(t)
	group := "cel" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	crd := crdWithSpec(group, `{type: object, properties: {size: {type: string, x-kubernetes-validations: [{rule: "self == oldSelf", message: "Value is immutable"}]}}}`)
	widget := func(size string) string {
		return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: NS}\nspec: {size: %s}\n", group, size)
	}
	t.Cleanup(func() {
		_ = cluster(t).Dynamic.Resource(crdGVR).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})
	mustApply(t, direct(t, "app", ns, crd, widget("small")), Options{})
	_, err := Apply(t.Context(), cluster(t), direct(t, "app", ns, crd, widget("large")), Options{})
	assert.ErrorContains(t, err, "Value is immutable")
	assert.ErrorContains(t, err, "--force")
	res := mustApply(t, direct(t, "app", ns, crd, widget("large")), Options{Force: true})
	assert.Equal(t, res.Counts.Recreated, 1)
}

// A ClusterRole and the ClusterRoleBinding that grants it, applied by an
// identity that holds the role's permissions but may not bind arbitrary
// roles: the API server checks the binding against the role, so the role
// is applied a stage earlier (ssa stages ClusterRoles with CRDs and
// Namespaces) and the plan's dry run does not refuse the binding.
func TestClusterRoleIsAppliedBeforeItsBinding(t *testing.T) {
	ns := env.Namespace(t)
	suffix := ns[len(ns)-5:]
	user := "rbac-applier-" + suffix
	admin := cluster(t).Clientset
	ctx := t.Context()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}, // what the release's role grants
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
	}
	t.Cleanup(func() {
		bg := context.Background()
		for _, name := range []string{user, "config-reader-" + suffix} {
			_ = admin.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
			_ = admin.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
		}
	})
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	cl := impersonated(t, user, func(cl *kube.Cluster) error {
		_, err := cl.Clientset.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
		return err
	})

	rel := direct(t, "app", ns, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: config-reader-%[1]s}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
`, suffix), fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: config-reader-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: config-reader-%[1]s}
subjects: [{kind: ServiceAccount, name: app, namespace: NS}]
`, suffix), `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: config-reader, namespace: NS}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
`, `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: config-reader, namespace: NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: config-reader}
subjects: [{kind: ServiceAccount, name: app, namespace: NS}]
`)
	res, err := Apply(ctx, cl, rel, Options{DryRun: true})
	assert.NilError(t, err)
	assert.Equal(t, res.Counts.Created, 4)
	res, err = Apply(ctx, cl, rel, Options{})
	assert.NilError(t, err)
	assert.Equal(t, res.Counts.Created, 4, "%+v", res.Applied)
	assert.Assert(t, live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "config-reader") != nil)
	assert.Assert(t, live(t, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "config-reader-"+suffix) != nil)
}

// A first apply under the lock creates the release's own rendered
// Namespace before anything else and reports it created (not unchanged),
// owned by opm's apply so the next apply writes nothing.
func TestFirstApplyReportsItsNamespaceCreated(t *testing.T) {
	ns := env.Namespace(t) + "-own"
	t.Cleanup(func() { _ = cluster(t).Clientset.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}) })
	rel := direct(t, "app", ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: NS}\n", configMapDoc("NS", "cfg"))
	opts := Options{Lock: &lock.Options{Holder: "test"}}
	res := mustApply(t, rel, opts)
	for _, o := range res.Applied {
		assert.Check(t, is.Equal(o.Action, manifest.Created), "%s/%s", o.Kind, o.Name)
	}
	res = mustApply(t, rel, opts)
	assert.Equal(t, res.Counts.Unchanged, 2, "%+v", res.Applied)
}

// An apply the server refuses after the release's namespace was created
// says so, instead of claiming nothing was applied.
func TestRefusedApplySaysWhatItWrote(t *testing.T) {
	ns := env.Namespace(t) + "-new"
	t.Cleanup(func() { _ = cluster(t).Clientset.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}) })
	rel := direct(t, "app", ns, configMapDoc("NS", "ok"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_A_Name, namespace: NS}\n")
	res, err := Apply(t.Context(), cluster(t), rel, Options{Lock: &lock.Options{Holder: "test"}})
	assert.ErrorContains(t, err, "nothing was applied but the release's namespace "+ns)
	assert.Check(t, res.NamespaceCreated)
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "ok") == nil)
}

// Apply events count the rendered objects, each once, so a terminal can
// say "N of M": the namespace a first locked apply creates aside counts in
// neither, and the last event of a release is M of M.
func TestProgressCountsEachRenderedObjectOnce(t *testing.T) {
	ns := env.Namespace(t) + "-count"
	t.Cleanup(func() { _ = cluster(t).Clientset.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}) })
	rel := direct(t, "app", ns, configMapDoc("NS", "a"), configMapDoc("NS", "b"), configMapDoc("NS", "c"))
	var events []Event
	mustApply(t, rel, Options{Lock: &lock.Options{Holder: "test"}, Progress: func(e Event) { events = append(events, e) }})
	var done []int
	for _, e := range events {
		if e.Phase != PhaseApply {
			continue
		}
		assert.Equal(t, e.Total, 3, "%+v", e)
		done = append(done, e.Done)
	}
	assert.DeepEqual(t, done, []int{0, 1, 2, 3}) // the namespace aside, then each ConfigMap
	// Again, nothing to create: each object once, up to 3 of 3.
	events = nil
	mustApply(t, rel, Options{Progress: func(e Event) { events = append(events, e) }})
	assert.Equal(t, events[len(events)-1].Done, 3)
	assert.Equal(t, events[len(events)-1].Total, 3)
}
