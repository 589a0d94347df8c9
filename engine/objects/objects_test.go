package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

func cluster(t *testing.T) *kube.Cluster {
	t.Helper()
	cl, err := kube.FromConfig(env.Config, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	return cl
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	return New(cluster(t), opts)
}

// res parses a YAML object; the namespace placeholder NS is replaced.
func res(t *testing.T, ns, y string) manifest.Resource {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(strings.ReplaceAll(y, "NS", ns)))
	assert.NilError(t, err)
	u := &unstructured.Unstructured{}
	assert.NilError(t, u.UnmarshalJSON(j))
	return manifest.Resource{Object: u, Component: "app"}
}

func get(t *testing.T, c *Client, r manifest.Resource) (*unstructured.Unstructured, error) {
	t.Helper()
	return c.Get(t.Context(), r.GVK(), r.Object.GetNamespace(), r.Object.GetName())
}

func configMap(t *testing.T, ns, name, value string) manifest.Resource {
	return res(t, ns, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: NS}
data: {key: %q}
`, name, value))
}

func TestMappingUsesRESTMapper(t *testing.T) {
	c := newClient(t, Options{})
	for kind, want := range map[schema.GroupKind]string{
		{Group: "networking.k8s.io", Kind: "Ingress"}:       "ingresses",
		{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: "networkpolicies",
		{Group: "policy", Kind: "PodDisruptionBudget"}:      "poddisruptionbudgets",
		{Kind: "Endpoints"}:                                 "endpoints",
	} {
		m, err := c.Mapping(kind, "")
		assert.NilError(t, err)
		assert.Equal(t, m.Resource.Resource, want)
	}
	_, err := c.Mapping(schema.GroupKind{Group: "example.com", Kind: "Nothing"}, "v1")
	assert.ErrorContains(t, err, "serves no kind Nothing")
	assert.Equal(t, fault.KindOf(err), fault.NotFound)
}

func TestApplyCreatedConfiguredUnchanged(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{})

	r := configMap(t, ns, "settings", "a")
	got := c.Apply(ctx, r, nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Created)
	live, err := get(t, c, r)
	assert.NilError(t, err)
	rv := live.GetResourceVersion()
	assert.Equal(t, live.GetManagedFields()[0].Manager, FieldManager)

	got = c.Apply(ctx, configMap(t, ns, "settings", "a"), nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Unchanged)
	live, err = get(t, c, r)
	assert.NilError(t, err)
	assert.Equal(t, live.GetResourceVersion(), rv, "an unchanged object is not written")

	got = c.Apply(ctx, configMap(t, ns, "settings", "b"), nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Configured)
	live, err = get(t, c, r)
	assert.NilError(t, err)
	assert.Assert(t, live.GetResourceVersion() != rv)
	v, _, _ := unstructured.NestedString(live.Object, "data", "key")
	assert.Equal(t, v, "b")
}

func TestApplyDryRunWritesNothing(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	dry := newClient(t, Options{DryRun: true})
	real := newClient(t, Options{})

	got := dry.Apply(ctx, configMap(t, ns, "new", "a"), nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Created)
	_, err := get(t, real, configMap(t, ns, "new", "a"))
	assert.Assert(t, apierrors.IsNotFound(err), "dry run must not create: %v", err)

	assert.NilError(t, real.Apply(ctx, configMap(t, ns, "old", "a"), nil, false).Err)
	before, err := get(t, real, configMap(t, ns, "old", "a"))
	assert.NilError(t, err)
	got = dry.Apply(ctx, configMap(t, ns, "old", "b"), nil, false)
	assert.Equal(t, got.Action, manifest.Configured)
	assert.Equal(t, dry.Apply(ctx, configMap(t, ns, "old", "a"), nil, false).Action, manifest.Unchanged)
	after, err := get(t, real, configMap(t, ns, "old", "a"))
	assert.NilError(t, err)
	assert.Equal(t, after.GetResourceVersion(), before.GetResourceVersion())
}

func TestApplyRefusesTerminatingObject(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{})
	r := res(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: held, namespace: NS, finalizers: [example.com/hold]}
data: {key: a}
`)
	assert.NilError(t, c.Apply(ctx, r, nil, false).Err)
	releaseFinalizer(t, c, r)
	assert.NilError(t, c.cluster.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Delete(ctx, "held", metav1.DeleteOptions{}))

	got := c.Apply(ctx, r, nil, false)
	assert.Equal(t, got.Action, manifest.Failed)
	var te *TerminatingError
	assert.Assert(t, errors.As(got.Err, &te))
	assert.ErrorContains(t, got.Err, "is being deleted")
}

// releaseFinalizer removes r's finalizers when the test ends, so the
// namespace can go.
func releaseFinalizer(t *testing.T, c *Client, r manifest.Resource) {
	t.Cleanup(func() {
		ri, _, err := c.resource(r.GVK(), r.Object.GetNamespace())
		if err != nil {
			t.Error(err)
			return
		}
		_, err = ri.Patch(context.Background(), r.Object.GetName(), "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

func deployment(t *testing.T, ns, app string) manifest.Resource {
	return res(t, ns, fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: web, image: "nginx:1.27"}]
`, app))
}

func TestImmutableFieldIsReportedWithTheField(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{})
	assert.NilError(t, c.Apply(ctx, deployment(t, ns, "a"), nil, false).Err)

	got := c.Apply(ctx, deployment(t, ns, "b"), nil, false)
	assert.Equal(t, got.Action, manifest.Failed)
	var ie *ImmutableError
	assert.Assert(t, errors.As(got.Err, &ie), "%v", got.Err)
	assert.DeepEqual(t, ie.Fields, []string{"spec.selector"})
	assert.ErrorContains(t, got.Err, "Deployment.apps/"+ns+"/web")
	assert.ErrorContains(t, got.Err, "--force")
	assert.Equal(t, fault.KindOf(got.Err), fault.Validation)
}

func TestImmutableFieldWithForceRecreates(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	assert.NilError(t, newClient(t, Options{}).Apply(ctx, deployment(t, ns, "a"), nil, false).Err)
	before, err := get(t, newClient(t, Options{}), deployment(t, ns, "a"))
	assert.NilError(t, err)

	// A dry run says what would happen and does nothing.
	got := newClient(t, Options{Force: true, DryRun: true}).Apply(ctx, deployment(t, ns, "b"), nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Recreated)
	same, err := get(t, newClient(t, Options{}), deployment(t, ns, "a"))
	assert.NilError(t, err)
	assert.Equal(t, same.GetUID(), before.GetUID())

	got = newClient(t, Options{Force: true}).Apply(ctx, deployment(t, ns, "b"), nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Recreated)
	assert.Assert(t, strings.Contains(got.Reason, "spec.selector"), got.Reason)
	after, err := get(t, newClient(t, Options{}), deployment(t, ns, "b"))
	assert.NilError(t, err)
	assert.Assert(t, after.GetUID() != before.GetUID(), "re-created")
	sel, _, _ := unstructured.NestedString(after.Object, "spec", "selector", "matchLabels", "app")
	assert.Equal(t, sel, "b")
}

func TestImmutableServiceClusterIP(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	svc := func(clusterIP string) manifest.Resource {
		spec := "{ports: [{port: 5432}]}"
		if clusterIP != "" {
			spec = fmt.Sprintf("{clusterIP: %q, ports: [{port: 5432}]}", clusterIP)
		}
		return res(t, ns, "apiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: NS}\nspec: "+spec+"\n")
	}
	c := newClient(t, Options{})
	// Let the server allocate (fixed addresses could collide with other
	// tests' Services), then ask for another one.
	assert.NilError(t, c.Apply(ctx, svc(""), nil, false).Err)
	live, err := get(t, c, svc(""))
	assert.NilError(t, err)
	allocated, _, _ := unstructured.NestedString(live.Object, "spec", "clusterIP")
	other := "10.0.0.250"
	if allocated == other {
		other = "10.0.0.251"
	}
	got := c.Apply(ctx, svc(other), nil, false)
	var ie *ImmutableError
	assert.Assert(t, errors.As(got.Err, &ie), "%v", got.Err)
	assert.Assert(t, is.Contains(strings.Join(ie.Fields, ","), "spec.clusterIPs"))
}

func TestDeleteUsesPreferredVersion(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{})
	d := deployment(t, ns, "a")
	assert.NilError(t, c.Apply(ctx, d, nil, false).Err)

	got, err := c.Delete(ctx, d.ID())
	assert.NilError(t, err)
	assert.Equal(t, got.Action, manifest.Deleted)
	assert.Equal(t, got.Version, "v1")
	assert.Equal(t, got.Reason, "")
	_, err = get(t, c, d)
	assert.Assert(t, apierrors.IsNotFound(err))

	got, err = c.Delete(ctx, d.ID())
	assert.NilError(t, err, "a missing object counts as deleted")
	assert.Equal(t, got.Reason, "already gone")

	got, err = c.Delete(ctx, manifest.ID{Group: "example.com", Kind: "Gone", Namespace: ns, Name: "x"})
	assert.NilError(t, err, "a kind no longer served has no objects left")
	assert.Equal(t, got.Action, manifest.Deleted)
}

func TestDeleteDryRun(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{})
	r := configMap(t, ns, "keep", "a")
	assert.NilError(t, c.Apply(ctx, r, nil, false).Err)
	got, err := newClient(t, Options{DryRun: true}).Delete(ctx, r.ID())
	assert.NilError(t, err)
	assert.Equal(t, got.Action, manifest.Deleted)
	_, err = get(t, c, r)
	assert.NilError(t, err, "still there")
}

func crd(t *testing.T, group string) manifest.Resource {
	return res(t, "", fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`, group))
}

// The core of RFC scenario N: a CRD and a custom resource of it in one
// set apply on the first try, because the CRD stage waits for Established.
func TestApplyAllWaitsForCRDs(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	group := ns + ".example.com"
	cr := res(t, ns, fmt.Sprintf(`
apiVersion: %s/v1
kind: Widget
metadata: {name: w, namespace: NS}
spec: {size: 3}
`, group))
	cm := configMap(t, ns, "cm", "a")
	rs := []manifest.Resource{crd(t, group), cm, cr}
	manifest.Sort(rs)
	t.Cleanup(func() {
		_, _ = newClient(t, Options{}).Delete(context.Background(), rs[0].ID())
	})

	// Dry run first: the custom resource cannot be checked yet, and says so.
	dry, err := newClient(t, Options{DryRun: true}).ApplyAll(ctx, rs, ApplyOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(dry), 3)
	assert.Equal(t, dry[2].Action, manifest.Created)
	assert.Assert(t, strings.Contains(dry[2].Reason, "CustomResourceDefinition"), dry[2].Reason)

	var events []Result
	c := newClient(t, Options{})
	got, err := c.ApplyAll(ctx, rs, ApplyOptions{Progress: func(r Result) { events = append(events, r) }})
	assert.NilError(t, err)
	assert.Equal(t, len(got), 3)
	assert.Equal(t, len(events), 3)
	for i, r := range got {
		assert.Equal(t, r.ID(), rs[i].ID(), "results in input order")
		assert.Equal(t, r.Action, manifest.Created)
	}
	assert.Equal(t, events[0].ID().Kind, "CustomResourceDefinition", "CRDs are applied first")
	live, err := get(t, c, cr)
	assert.NilError(t, err)
	size, _, _ := unstructured.NestedInt64(live.Object, "spec", "size")
	assert.Equal(t, size, int64(3))
}

func TestApplyAllStopsAfterAFailedStage(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	bad := res(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: bad, namespace: NS}
data: {"not a valid key": x}
`)
	good := configMap(t, ns, "good", "a")
	svc := res(t, ns, `
apiVersion: v1
kind: Service
metadata: {name: later, namespace: NS}
spec: {ports: [{port: 80}]}
`)
	rs := []manifest.Resource{bad, good, svc}
	manifest.Sort(rs)
	c := newClient(t, Options{})
	got, err := c.ApplyAll(ctx, rs, ApplyOptions{})
	assert.ErrorContains(t, err, "ConfigMap/"+ns+"/bad")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Equal(t, len(got), 2, "the Service stage never started")
	_, err = get(t, c, svc)
	assert.Assert(t, apierrors.IsNotFound(err))
	_, err = get(t, c, good)
	assert.NilError(t, err, "the rest of the failing stage is applied")
}

func TestApplyAllBoundedConcurrency(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	var rs []manifest.Resource
	for i := range 40 {
		rs = append(rs, configMap(t, ns, fmt.Sprintf("cm-%02d", i), "v"))
	}
	c := newClient(t, Options{Concurrency: 4})
	got, err := c.ApplyAll(ctx, rs, ApplyOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(got), 40)
	got, err = c.ApplyAll(ctx, rs, ApplyOptions{})
	assert.NilError(t, err)
	for _, r := range got {
		assert.Equal(t, r.Action, manifest.Unchanged)
	}
}

func TestWaitGone(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{WaitTimeout: 300 * time.Millisecond})
	r := res(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: held, namespace: NS, finalizers: [example.com/hold]}
data: {key: a}
`)
	assert.NilError(t, c.Apply(ctx, r, nil, false).Err)
	releaseFinalizer(t, c, r)
	live, err := get(t, c, r)
	assert.NilError(t, err)
	gvk := schema.GroupVersionKind{Kind: "ConfigMap"}

	err = c.WaitGone(ctx, gvk, ns, "held", "")
	assert.ErrorContains(t, err, "still exists", "an empty uid waits for any object of the name")
	err = c.WaitGone(ctx, gvk, ns, "held", live.GetUID())
	assert.ErrorContains(t, err, "still exists")
	assert.NilError(t, c.WaitGone(ctx, gvk, ns, "held", "another-uid"), "replaced by another object")
	assert.NilError(t, c.WaitGone(ctx, gvk, ns, "never-existed", ""))
}

// In a dry run a new Namespace is not created, so objects in it are
// reported as created rather than failing with "namespace not found".
func TestApplyAllDryRunIntoNewNamespace(t *testing.T) {
	ns := env.Namespace(t) + "-new"
	rs := []manifest.Resource{
		res(t, ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: NS}\n"),
		configMap(t, ns, "cm", "a"),
	}
	got, err := newClient(t, Options{DryRun: true}).ApplyAll(t.Context(), rs, ApplyOptions{})
	assert.NilError(t, err)
	assert.Equal(t, got[0].Action, manifest.Created)
	assert.Equal(t, got[1].Action, manifest.Created)
	assert.Assert(t, is.Contains(got[1].Reason, "its Namespace is created by this apply"))

	// Without the Namespace in the set, the missing namespace is an error.
	_, err = newClient(t, Options{DryRun: true}).ApplyAll(t.Context(), rs[1:], ApplyOptions{})
	assert.ErrorContains(t, err, "not found")
}

func pvc(t *testing.T, ns, class string) manifest.Resource {
	return res(t, ns, fmt.Sprintf(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: NS}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: %s}
`, class))
}

// Re-creating a PersistentVolumeClaim deletes its data: --force alone does
// not do it, it takes RecreatePVCs (opm's --prune-pvcs) as well.
func TestForceRecreatesPVCsOnlyWhenAllowed(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	assert.NilError(t, newClient(t, Options{}).Apply(ctx, pvc(t, ns, "slow"), nil, false).Err)
	before, err := get(t, newClient(t, Options{}), pvc(t, ns, "slow"))
	assert.NilError(t, err)

	got := newClient(t, Options{}).Apply(ctx, pvc(t, ns, "fast"), nil, false)
	var ie *ImmutableError
	assert.Assert(t, errors.As(got.Err, &ie), "a PVC spec change is an immutable change: %v", got.Err)

	got = newClient(t, Options{Force: true}).Apply(ctx, pvc(t, ns, "fast"), nil, false)
	assert.Equal(t, got.Action, manifest.Failed)
	assert.ErrorContains(t, got.Err, "--prune-pvcs")
	same, err := get(t, newClient(t, Options{}), pvc(t, ns, "slow"))
	assert.NilError(t, err)
	assert.Equal(t, same.GetUID(), before.GetUID(), "the claim and its data are still there")

	// The pvc-protection controller releases the claim's finalizer once
	// its deletion starts (no pod uses it), and the re-create waits for it.
	got = newClient(t, Options{Force: true, RecreatePVCs: true, WaitTimeout: 30 * time.Second}).Apply(ctx, pvc(t, ns, "fast"), nil, false)
	assert.NilError(t, got.Err)
	assert.Equal(t, got.Action, manifest.Recreated)
	after, err := get(t, newClient(t, Options{}), pvc(t, ns, "fast"))
	assert.NilError(t, err)
	assert.Assert(t, after.GetUID() != before.GetUID(), "re-created")
}
