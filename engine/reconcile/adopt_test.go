package reconcile

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/preview"
	"github.com/opmodel/pipeline/engine/render"
)

// The release of the take-over tests, before and after the module drops a
// ConfigMap key, a container's env var and a whole container.
const (
	adoptConfigMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {kept: "1", dropped: "2"}
`
	adoptConfigMapAfter = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {kept: "1"}
`
	adoptDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        env: [{name: KEPT, value: "1"}, {name: DROPPED, value: "2"}]
      - name: sidecar
        image: registry.k8s.io/pause:3.10
`
	adoptDeploymentAfter = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        env: [{name: KEPT, value: "1"}]
`
)

// kubectl runs the real kubectl against the test cluster.
func kubectl(t *testing.T, stdin string, extraEnv []string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "kubectl", append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
}

// manifestYAML is rel's objects as `opm render` prints them.
func manifestYAML(t *testing.T, rel *render.Release) string {
	t.Helper()
	var b strings.Builder
	for _, r := range rel.Resources {
		y, err := yaml.Marshal(r.Object.Object)
		assert.NilError(t, err)
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

// helmWrite creates rel's objects the way Helm 3 does: Create requests
// (Update operations in managedFields) by the manager "helm", with Helm's
// own labels and annotations added, and Helm's release Secret beside them.
func helmWrite(t *testing.T, rel *render.Release) {
	t.Helper()
	cl := cluster(t)
	for _, r := range rel.Resources {
		u := r.Object.DeepCopy()
		labels := u.GetLabels()
		labels["app.kubernetes.io/managed-by"] = "Helm"
		labels["helm.sh/chart"] = "web-0.1.0"
		u.SetLabels(labels)
		u.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": rel.Namespace})
		m, err := cl.Mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		assert.NilError(t, err)
		_, err = cl.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{FieldManager: "helm"})
		assert.NilError(t, err)
	}
}

// TestApplyTakesOverWhatOtherToolsWrote is the migration of a team to opm:
// objects first written by `kubectl apply` of the render, by `kubectl
// create`, by Helm (Update requests of the manager "helm") or edited with
// `kubectl edit` after an opm apply are adopted; then the module drops a
// ConfigMap key, an env var and a container, and the next apply removes
// them: the live objects equal the render, and a preview finds nothing.
func TestApplyTakesOverWhatOtherToolsWrote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, rel *render.Release)
		// edited is set when the writer touched only the ConfigMap.
		edited bool
	}{
		{"kubectl client-side apply", func(t *testing.T, rel *render.Release) {
			kubectl(t, manifestYAML(t, rel), nil, "apply", "-f", "-")
		}, false},
		{"kubectl server-side apply co-owner", func(t *testing.T, rel *render.Release) {
			mustApply(t, rel, Options{})
			kubectl(t, manifestYAML(t, rel), nil, "apply", "--server-side", "-f", "-")
		}, false},
		{"kubectl create", func(t *testing.T, rel *render.Release) {
			kubectl(t, manifestYAML(t, rel), nil, "create", "-f", "-")
		}, false},
		{"helm", helmWrite, false},
		{"kubectl edit after opm", func(t *testing.T, rel *render.Release) {
			mustApply(t, rel, Options{})
			// The editor rewrites a value in place; kubectl runs it through sh -c.
			kubectl(t, "", []string{`KUBE_EDITOR=sed -i -e 's/^  kept: .*/  kept: "edited"/'`}, "edit", "-n", rel.Namespace, "configmap/settings")
			assert.Equal(t, live(t, "v1", "ConfigMap", rel.Namespace, "settings").Object["data"].(map[string]any)["kept"], "edited")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			before := direct(t, "web", ns, adoptConfigMap, adoptDeployment)
			tc.write(t, before)

			res, err := Apply(t.Context(), cluster(t), before, Options{Adopt: true})
			assert.NilError(t, err)
			for _, o := range res.Applied {
				if tc.edited && o.Kind != "ConfigMap" {
					continue
				}
				assert.Check(t, o.Action != manifest.Unchanged, "%s/%s was adopted without taking ownership: %+v", o.Kind, o.Name, o)
			}
			cm := live(t, "v1", "ConfigMap", ns, "settings")
			assert.DeepEqual(t, cm.Object["data"], map[string]any{"kept": "1", "dropped": "2"})
			assert.Check(t, !slices.ContainsFunc(cm.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager != objects.FieldManager }),
				"managers left on the ConfigMap: %v", managers(cm))

			after := direct(t, "web", ns, adoptConfigMapAfter, adoptDeploymentAfter)
			res, err = Apply(t.Context(), cluster(t), after, Options{})
			assert.NilError(t, err)
			assert.Check(t, is.Equal(res.Counts.Configured, 2), "the drops are written: %+v", res.Applied)
			assertLiveEqualsRender(t, after)

			p, err := preview.Release(t.Context(), cluster(t), after, preview.Options{})
			assert.NilError(t, err)
			for _, o := range p.Objects {
				assert.Check(t, is.Equal(o.Action, manifest.Unchanged), "%s: %s\n%s", o.ID(), o.Warning, o.Diff)
			}
			// The re-apply that changes nothing writes nothing.
			res, err = Apply(t.Context(), cluster(t), after, Options{})
			assert.NilError(t, err)
			assert.Equal(t, res.Counts.Unchanged, 2, "%+v", res.Applied)
		})
	}
}

func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	return out
}

// assertLiveEqualsRender checks that the live ConfigMap and Deployment hold
// exactly what rel declares: no key, env var, container, label or
// annotation another tool left behind.
func assertLiveEqualsRender(t *testing.T, rel *render.Release) {
	t.Helper()
	ns := rel.Namespace
	cm := live(t, "v1", "ConfigMap", ns, "settings")
	assert.DeepEqual(t, cm.Object["data"], map[string]any{"kept": "1"})
	dep := live(t, "apps/v1", "Deployment", ns, "web")
	containers, _, err := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	assert.NilError(t, err)
	assert.Equal(t, len(containers), 1, "containers: %v", containers)
	c := containers[0].(map[string]any)
	assert.Equal(t, c["name"], "app")
	assert.DeepEqual(t, c["env"], []any{map[string]any{"name": "KEPT", "value": "1"}})
	for _, u := range []*unstructured.Unstructured{cm, dep} {
		for _, r := range rel.Resources {
			if r.Object.GetName() == u.GetName() && r.Object.GetKind() == u.GetKind() {
				assert.DeepEqual(t, u.GetLabels(), r.Object.GetLabels())
			}
		}
		ann := u.GetAnnotations()
		delete(ann, "deployment.kubernetes.io/revision") // the Deployment controller's own
		assert.Check(t, is.Len(ann, 0), "%s keeps annotations %v", u.GetKind(), ann)
	}
}

// A manager outside the take-over set that owns a field the release sets
// to another value is a conflict: the apply names field and manager and
// writes nothing; --force-conflicts takes the field, and the change says so.
func TestApplyRefusesConflictsWithOtherManagers(t *testing.T) {
	ns := env.Namespace(t)
	rel := direct(t, "web", ns, adoptConfigMap)
	mustApply(t, rel, Options{})
	cl := cluster(t)
	cms := cl.Clientset.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(t.Context(), "settings", metav1.GetOptions{})
	assert.NilError(t, err)
	cm.Data["kept"] = "changed by the operator"
	_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "some-operator"})
	assert.NilError(t, err)
	rv := live(t, "v1", "ConfigMap", ns, "settings").GetResourceVersion()

	_, err = Apply(t.Context(), cl, rel, Options{})
	assert.ErrorContains(t, err, `.data.kept (owned by "some-operator")`)
	assert.ErrorContains(t, err, "--force-conflicts")
	assert.Equal(t, live(t, "v1", "ConfigMap", ns, "settings").GetResourceVersion(), rv, "a refused conflict wrote the object")

	p, err := preview.Release(t.Context(), cl, rel, preview.Options{})
	assert.NilError(t, err)
	assert.Equal(t, p.Objects[0].Action, manifest.Modified)
	assert.Check(t, is.Contains(p.Objects[0].Warning, `owned by "some-operator"`))

	res, err := Apply(t.Context(), cl, rel, Options{ForceConflicts: true})
	assert.NilError(t, err)
	assert.Equal(t, live(t, "v1", "ConfigMap", ns, "settings").Object["data"].(map[string]any)["kept"], "1")
	assert.Equal(t, res.Counts.Configured, 1)
	s := secret(t, rel)
	assert.Check(t, is.Contains(strings.Join(s.Keys, ","), "change-"))
	latest := s.Changes[s.Index[0]]
	assert.DeepEqual(t, latest.ForcedFrom, []string{"some-operator"})
}

// opm diff shows a field the next apply removes after a take-over, and
// says which fields it cannot remove because another manager owns them.
func TestPreviewShowsWhatTakeOverRemoves(t *testing.T) {
	ns := env.Namespace(t)
	before := direct(t, "web", ns, adoptConfigMap)
	kubectl(t, manifestYAML(t, before), nil, "apply", "-f", "-")
	after := direct(t, "web", ns, adoptConfigMapAfter)

	p, err := preview.Release(t.Context(), cluster(t), after, preview.Options{})
	assert.NilError(t, err)
	o := p.Objects[0]
	assert.Equal(t, o.Action, manifest.Modified)
	assert.Check(t, is.Contains(o.Diff, `-  dropped: "2"`))
	assert.Check(t, is.Contains(o.Warning, "would take ownership"))
	assert.Check(t, is.Contains(o.Warning, "kubectl-client-side-apply"))

	// A key another (non-take-over) manager also owns stays, and says so.
	ns2 := env.Namespace(t)
	rel := direct(t, "web", ns2, adoptConfigMap)
	mustApply(t, rel, Options{})
	cl := cluster(t)
	applyAs(t, ns2, "other-team", map[string]any{"dropped": "2"})
	after2 := direct(t, "web", ns2, adoptConfigMapAfter)
	p, err = preview.Release(t.Context(), cl, after2, preview.Options{})
	assert.NilError(t, err)
	assert.Check(t, is.Contains(p.Objects[0].Warning, "kept, another manager owns it: .data.dropped (other-team)"))
	_, err = Apply(t.Context(), cl, after2, Options{})
	assert.NilError(t, err)
	assert.Equal(t, live(t, "v1", "ConfigMap", ns2, "settings").Object["data"].(map[string]any)["dropped"], "2")
}

// applyAs server-side applies data to the ConfigMap settings as manager.
func applyAs(t *testing.T, ns, manager string, data map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": ns}, "data": data}}
	_, err := cluster(t).Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
		Apply(t.Context(), "settings", u, metav1.ApplyOptions{FieldManager: manager})
	assert.NilError(t, err)
}

// The preview of a take-over works with the rights an applying identity
// holds (opm rbac: get, list, patch, create, delete — no update): what the
// apply would remove is shown through a dry-run patch.
func TestPreviewOfATakeOverNeedsNoUpdateRight(t *testing.T) {
	ns := env.Namespace(t)
	before := direct(t, "web", ns, adoptConfigMap)
	kubectl(t, manifestYAML(t, before), nil, "apply", "-f", "-")
	user := "patcher-" + ns[len(ns)-5:]
	admin := cluster(t).Clientset
	_, err := admin.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "patch", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}},
	}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	cl := impersonated(t, user, func(cl *kube.Cluster) error {
		_, err := cl.Clientset.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
		return err
	})
	p, err := preview.Release(t.Context(), cl, direct(t, "web", ns, adoptConfigMapAfter), preview.Options{})
	assert.NilError(t, err)
	assert.Check(t, is.Contains(p.Objects[0].Diff, `-  dropped: "2"`))
}
