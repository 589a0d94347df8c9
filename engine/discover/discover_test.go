package discover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

const (
	release   = "blog"
	releaseID = "5f1c2a0e-7c1b-5d55-9a39-0d7f1f6b2c11"
)

func cluster(t *testing.T) *kube.Cluster {
	t.Helper()
	cl, err := kube.FromConfig(env.Config, "test", kube.Options{})
	assert.NilError(t, err)
	return cl
}

// labelsFor returns the release labels: identity ones (both selectors
// match) unless old, which gives a pre-identity object (name only).
func labelsFor(name, id string) map[string]any {
	l := map[string]any{}
	if name != "" {
		l[manifest.LabelManagedBy] = manifest.ManagedByOPM
		l[manifest.LabelReleaseName] = name
	}
	if id != "" {
		l[manifest.LabelReleaseUUID] = id
	}
	return l
}

func obj(apiVersion, kind, namespace, name string, labels map[string]any, extra map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if labels != nil {
		meta["labels"] = labels
	}
	u := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range extra {
		u[k] = v
	}
	return &unstructured.Unstructured{Object: u}
}

func configMap(namespace, name string, labels map[string]any) *unstructured.Unstructured {
	return obj("v1", "ConfigMap", namespace, name, labels, map[string]any{"data": map[string]any{"k": "v"}})
}

func deployment(namespace, name string, labels map[string]any) *unstructured.Unstructured {
	sel := map[string]any{"app": name}
	return obj("apps/v1", "Deployment", namespace, name, labels, map[string]any{"spec": map[string]any{
		"replicas": int64(1),
		"selector": map[string]any{"matchLabels": sel},
		"template": map[string]any{
			"metadata": map[string]any{"labels": sel},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}},
		},
	}})
}

// create creates u through the cluster's mapper and returns the stored object.
func create(t *testing.T, cl *kube.Cluster, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	assert.NilError(t, err)
	ri := cl.Dynamic.Resource(m.Resource)
	var out *unstructured.Unstructured
	if u.GetNamespace() != "" {
		out, err = ri.Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{})
	} else {
		out, err = ri.Create(t.Context(), u, metav1.CreateOptions{})
		// t.Context() is already cancelled when cleanups run.
		t.Cleanup(func() { _ = ri.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
	assert.NilError(t, err, "create %s %s/%s", gvk.Kind, u.GetNamespace(), u.GetName())
	return out
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	slices.Sort(out)
	return out
}

func TestByLabelsUnionsSelectorsAndExcludesWhatIsNotTheRelease(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	other := env.Namespace(t)
	// Cluster-scoped names are shared by every test run on a long-lived
	// cluster: make them unique.
	crName := ns + "-reader"

	both := create(t, cl, configMap(ns, "both", labelsFor(release, releaseID)))
	create(t, cl, configMap(ns, "old", labelsFor(release, "")))
	// A release-id label with no value is no identity: the name finds it.
	emptyID := labelsFor(release, "")
	emptyID[manifest.LabelReleaseUUID] = ""
	create(t, cl, configMap(ns, "emptyid", emptyID))
	create(t, cl, configMap(ns, "idonly", labelsFor("", releaseID)))
	create(t, cl, deployment(ns, "web", labelsFor(release, releaseID)))
	create(t, cl, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", crName, labelsFor(release, releaseID), nil))

	// Never part of the result.
	invLabels := labelsFor(release, releaseID)
	invLabels[inventory.LabelComponent] = inventory.ComponentInventory
	create(t, cl, obj("v1", "Secret", ns, "opm."+release+"."+releaseID, invLabels, map[string]any{"type": "opmodel.dev/release"}))
	owned := configMap(ns, "owned", labelsFor(release, releaseID))
	controller := true
	owned.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: both.GetName(), UID: both.GetUID(), Controller: &controller,
	}})
	create(t, cl, owned)
	create(t, cl, obj("v1", "Endpoints", ns, "web", labelsFor(release, releaseID), nil))
	create(t, cl, obj("discovery.k8s.io/v1", "EndpointSlice", ns, "web-abc", labelsFor(release, releaseID),
		map[string]any{"addressType": "IPv4", "endpoints": []any{}}))
	// Another release, or the same release name in another namespace.
	create(t, cl, configMap(ns, "other-release", labelsFor("shop", "")))
	create(t, cl, configMap(other, "both", labelsFor(release, releaseID)))
	create(t, cl, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", crName+"-elsewhere",
		labelsFor(release, "0c6e1b7a-1111-5222-8333-944455556666"), nil))

	t.Run("both selectors", func(t *testing.T) {
		got, stats, err := ByLabels(t.Context(), cl, Query{Namespace: ns, ReleaseName: release, ReleaseID: releaseID}, Options{})
		assert.NilError(t, err)
		assert.DeepEqual(t, names(got), []string{"ClusterRole/" + crName, "ConfigMap/both", "ConfigMap/emptyid", "ConfigMap/idonly", "ConfigMap/old", "Deployment/web"})
		uids := map[string]bool{}
		for _, u := range got {
			assert.Check(t, !uids[string(u.GetUID())], "%s listed twice", u.GetName())
			uids[string(u.GetUID())] = true
		}
		assert.Equal(t, stats.Strategy, StrategyLabels)
		// Two selectors per listable type, one page each.
		assert.Equal(t, stats.Requests, 2*stats.Types)
		assert.Check(t, stats.Types > 20, "only %d types listed", stats.Types)
		assert.Check(t, is.Len(stats.Skipped, 0))
		// Apply order: ClusterRole (5) before ConfigMap (15) before Deployment (100).
		assert.Equal(t, got[0].GetKind(), "ClusterRole")
		assert.Equal(t, got[len(got)-1].GetKind(), "Deployment")
		assert.Equal(t, got[len(got)-1].GetAPIVersion(), "apps/v1")
	})
	t.Run("name only finds pre-identity objects", func(t *testing.T) {
		got, _, err := ByLabels(t.Context(), cl, Query{Namespace: ns, ReleaseName: release}, Options{})
		assert.NilError(t, err)
		// Without a release id the same-named release elsewhere cannot be
		// told apart for cluster-scoped kinds: no label names the namespace.
		assert.DeepEqual(t, names(got), []string{"ClusterRole/" + crName, "ClusterRole/" + crName + "-elsewhere", "ConfigMap/both", "ConfigMap/emptyid", "ConfigMap/old", "Deployment/web"})
	})
	t.Run("release id only", func(t *testing.T) {
		got, stats, err := ByLabels(t.Context(), cl, Query{Namespace: ns, ReleaseID: releaseID}, Options{Workers: 2})
		assert.NilError(t, err)
		assert.DeepEqual(t, names(got), []string{"ClusterRole/" + crName, "ConfigMap/both", "ConfigMap/idonly", "Deployment/web"})
		assert.Equal(t, stats.Requests, stats.Types)
	})
	// The ghost scan of a diff lists metadata only: it must find exactly
	// what the whole scan finds, with the identity, labels and owners a
	// ghost is told by, and Fetch must read back the whole object.
	t.Run("metadata only finds the same", func(t *testing.T) {
		for _, q := range []Query{{Namespace: ns, ReleaseName: release, ReleaseID: releaseID}, {Namespace: ns, ReleaseName: release}, {Namespace: ns, ReleaseID: releaseID}} {
			whole, wstats, err := ByLabels(t.Context(), cl, q, Options{})
			assert.NilError(t, err)
			meta, mstats, err := ByLabels(t.Context(), cl, q, Options{MetadataOnly: true})
			assert.NilError(t, err)
			assert.Equal(t, mstats.Requests, wstats.Requests)
			assert.Equal(t, len(meta), len(whole), "%+v: %v against %v", q, names(meta), names(whole))
			for i := range whole {
				w, m := whole[i], meta[i]
				assert.Equal(t, m.GetAPIVersion(), w.GetAPIVersion())
				assert.Equal(t, IDOf(m), IDOf(w))
				assert.Equal(t, m.GetUID(), w.GetUID())
				assert.DeepEqual(t, m.GetLabels(), w.GetLabels())
				assert.DeepEqual(t, m.GetOwnerReferences(), w.GetOwnerReferences())
				_, hasData := m.Object["data"]
				_, hasSpec := m.Object["spec"]
				assert.Check(t, !hasData && !hasSpec, "%s came back with content", IDOf(m))
				got, err := Fetch(t.Context(), cl, m)
				assert.NilError(t, err)
				assert.DeepEqual(t, got.Object, w.Object)
			}
		}
	})
	t.Run("fetch of what is gone", func(t *testing.T) {
		gone := create(t, cl, configMap(ns, "gone", labelsFor(release, releaseID)))
		assert.NilError(t, cl.Clientset.CoreV1().ConfigMaps(ns).Delete(t.Context(), "gone", metav1.DeleteOptions{}))
		got, err := Fetch(t.Context(), cl, gone)
		assert.NilError(t, err)
		assert.Assert(t, got == nil)
	})
	t.Run("needs a namespace and a name or id", func(t *testing.T) {
		_, _, err := ByLabels(t.Context(), cl, Query{ReleaseName: release}, Options{})
		assert.ErrorContains(t, err, "namespace")
		assert.Equal(t, fault.KindOf(err), fault.Validation)
		_, _, err = ByLabels(t.Context(), cl, Query{Namespace: ns}, Options{})
		assert.ErrorContains(t, err, "release name or a release id")
		assert.Equal(t, fault.KindOf(err), fault.Validation)
		_, _, err = ByLabels(t.Context(), cl, Query{Namespace: ns, ReleaseName: "not a label value"}, Options{})
		assert.Equal(t, fault.KindOf(err), fault.Validation)
	})
}

func TestFromInventoryMarksMissingAndUsesPreferredVersions(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	create(t, cl, configMap(ns, "present", nil))
	create(t, cl, deployment(ns, "web", nil))
	create(t, cl, obj("autoscaling/v2", "HorizontalPodAutoscaler", ns, "web", nil, map[string]any{"spec": map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas":    int64(1), "maxReplicas": int64(3),
	}}))
	crName := ns + "-reader"
	create(t, cl, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", crName, nil, nil))

	entries := []inventory.Entry{
		{ID: manifest.ID{Kind: "ConfigMap", Namespace: ns, Name: "present"}, V: "v1", Component: "app"},
		{ID: manifest.ID{Kind: "ConfigMap", Namespace: ns, Name: "deleted"}, V: "v1", Component: "app"},
		// Versions the server does not serve (edge case 6).
		{ID: manifest.ID{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "web"}, V: "v9", Component: "app"},
		{ID: manifest.ID{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: ns, Name: "web"}, V: "v2beta2", Component: "app"},
		{ID: manifest.ID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: crName}, V: "v1", Component: "rbac"},
		// A kind the cluster does not serve at all (its CRD was removed).
		{ID: manifest.ID{Group: "example.opmodel.dev", Kind: "Widget", Namespace: ns, Name: "w"}, V: "v1", Component: "app"},
	}
	got, stats, err := FromInventory(t.Context(), cl, entries, Options{})
	assert.NilError(t, err)
	assert.Equal(t, stats.Strategy, StrategyInventory)
	assert.Equal(t, stats.Requests, 5, "one GET per entry of a served kind")
	assert.Equal(t, len(got), len(entries))

	type row struct {
		Name, APIVersion string
		Missing          bool
	}
	var rows []row
	for i, f := range got {
		assert.Equal(t, f.Entry, entries[i], "result in entry order")
		r := row{Name: f.Entry.Name, Missing: f.Missing}
		if f.Object != nil {
			r.APIVersion = f.Object.GetAPIVersion()
			assert.Equal(t, f.Object.GetName(), f.Entry.Name)
		}
		assert.Check(t, f.Missing == (f.Object == nil), "%s: Missing and Object disagree", f.Entry.ID)
		rows = append(rows, r)
	}
	assert.DeepEqual(t, rows, []row{
		{Name: "present", APIVersion: "v1"},
		{Name: "deleted", Missing: true},
		{Name: "web", APIVersion: "apps/v1"},
		{Name: "web", APIVersion: "autoscaling/v2"},
		{Name: crName, APIVersion: "rbac.authorization.k8s.io/v1"},
		{Name: "w", Missing: true},
	})
}

func TestFromInventoryErrorsNameTheObject(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	// A namespaced kind without a namespace is a broken inventory.
	_, _, err := FromInventory(t.Context(), cl, []inventory.Entry{{ID: manifest.ID{Kind: "ConfigMap", Name: "x"}, V: "v1"}}, Options{})
	assert.ErrorContains(t, err, "ConfigMap/x")
	assert.Equal(t, fault.KindOf(err), fault.Validation)

	// A GET that fails for another reason than 404 fails the call.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err = FromInventory(ctx, cl, []inventory.Entry{{ID: manifest.ID{Kind: "ConfigMap", Namespace: ns, Name: "x"}, V: "v1"}}, Options{})
	assert.Assert(t, errors.Is(err, context.Canceled), "got %v", err)
}

func TestRequestCountsInventoryVersusLabelScan(t *testing.T) {
	ns := env.Namespace(t)
	setup := cluster(t)
	// Its own release id, so cluster-scoped objects of other tests on the
	// same server cannot match.
	const releaseID = "9b0e8f4c-3d2a-5b1c-8e7f-6a5b4c3d2e1f"
	const n = 20
	var entries []inventory.Entry
	for i := range n {
		u := create(t, setup, configMap(ns, fmt.Sprintf("cm-%02d", i), labelsFor(release, releaseID)))
		entries = append(entries, inventory.EntryOf(manifest.Resource{Object: u, Component: "app"}))
	}

	// Cold: a fresh cluster client whose discovery cache is empty, as in a
	// CLI invocation.
	measure := func(t *testing.T, warm bool, do func(cl *kube.Cluster) Stats) (wire int64, stats Stats) {
		cfg, counter := kubetest.CountingConfig(env.Config)
		cl, err := kube.FromConfig(cfg, "test", kube.Options{})
		assert.NilError(t, err)
		if warm {
			_, err := cl.Mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"})
			assert.NilError(t, err)
			_, err = cl.Discovery.ServerPreferredResources()
			assert.NilError(t, err)
			counter.Store(0)
		}
		stats = do(cl)
		return counter.Load(), stats
	}
	fromInventory := func(cl *kube.Cluster) Stats {
		found, stats, err := FromInventory(t.Context(), cl, entries, Options{})
		assert.NilError(t, err)
		assert.Equal(t, len(found), n)
		return stats
	}
	byLabels := func(cl *kube.Cluster) Stats {
		got, stats, err := ByLabels(t.Context(), cl, Query{Namespace: ns, ReleaseName: release, ReleaseID: releaseID}, Options{})
		assert.NilError(t, err)
		assert.Equal(t, len(got), n)
		return stats
	}

	invWarm, invStats := measure(t, true, fromInventory)
	assert.Equal(t, invWarm, int64(n), "inventory discovery makes exactly one GET per object")
	assert.Equal(t, invStats.Requests, n)
	invCold, _ := measure(t, false, fromInventory)

	labWarm, labStats := measure(t, true, byLabels)
	assert.Equal(t, labWarm, int64(labStats.Requests), "Stats.Requests counts every list request")
	labCold, _ := measure(t, false, byLabels)
	assert.Check(t, labWarm > int64(n), "label scan: %d requests for %d objects", labWarm, n)
	assert.Check(t, labCold > invCold)

	t.Logf("release of %d objects: inventory %d requests (%d with cold discovery); label scan %d requests over %d types (%d with cold discovery)",
		n, invWarm, invCold, labWarm, labStats.Types, labCold)
}

func TestGhostsAreLabelledObjectsNobodyKnows(t *testing.T) {
	cm := func(name string) *unstructured.Unstructured { return configMap("ns", name, nil) }
	sts := obj("apps/v1", "StatefulSet", "ns", "minecraft-server", nil, nil)
	labelled := []*unstructured.Unstructured{cm("config"), obj("apps/v1", "StatefulSet", "ns", "minecraft", nil, nil), sts}
	inv := []manifest.ID{{Kind: "ConfigMap", Namespace: "ns", Name: "config"}, {Group: "apps", Kind: "StatefulSet", Namespace: "ns", Name: "minecraft"}}
	render := []manifest.ID{{Group: "apps", Kind: "StatefulSet", Namespace: "ns", Name: "minecraft"}}

	got := Ghosts(labelled, inv, render)
	assert.Equal(t, len(got), 1)
	assert.Equal(t, got[0], sts)

	// The same name in another group or namespace is another object.
	assert.Equal(t, len(Ghosts([]*unstructured.Unstructured{cm("config")}, []manifest.ID{{Kind: "ConfigMap", Namespace: "other", Name: "config"}})), 1)
	assert.Equal(t, len(Ghosts(labelled)), 3)
}

func TestEntryOfTakesTheComponentLabel(t *testing.T) {
	u := deployment("ns", "web", map[string]any{manifest.LabelComponentName: "frontend"})
	assert.DeepEqual(t, EntryOf(u), inventory.Entry{ID: manifest.ID{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "web"}, V: "v1", Component: "frontend"})
}

// A ghost is read with the right the scan already needs: an identity that
// may list ConfigMaps but get none (as opm rbac grants a guarded kind:
// list, and get by name only for what the release manages) still reads a
// ghost whole, where a GET of it is refused.
func TestFetchNeedsOnlyList(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	ghost := create(t, cl, configMap(ns, "ghost", labelsFor(release, releaseID)))
	user := "lister-" + ns
	_, err := cl.Clientset.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lister"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = cl.Clientset.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lister"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "lister"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	as, err := kube.FromConfig(cfg, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	// The authorizer learns of new bindings through a watch.
	kubetest.WaitFor(t, 10*time.Second, func() error {
		_, err := as.Clientset.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
		return err
	})
	_, err = as.Clientset.CoreV1().ConfigMaps(ns).Get(t.Context(), "ghost", metav1.GetOptions{})
	assert.Assert(t, apierrors.IsForbidden(err), "the identity may not get: %v", err)

	meta, _, err := ByLabels(t.Context(), as, Query{Namespace: ns, ReleaseName: release, ReleaseID: releaseID}, Options{MetadataOnly: true})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(meta), []string{"ConfigMap/ghost"})
	got, err := Fetch(t.Context(), as, meta[0])
	assert.NilError(t, err)
	assert.Equal(t, got.GetUID(), ghost.GetUID())
	data, _, _ := unstructured.NestedStringMap(got.Object, "data")
	assert.DeepEqual(t, data, map[string]string{"k": "v"})
}
