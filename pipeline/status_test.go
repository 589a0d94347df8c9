package pipeline_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	secrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

func dyn() dynamic.Interface { return dynamic.NewForConfigOrDie(env.Config) }

// markDeploymentReady writes the status a Deployment controller would,
// through the status subresource (no controllers run on the test server).
func markDeploymentReady(t *testing.T, ns, name string) {
	t.Helper()
	d, err := dyn().Resource(deployments).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	assert.NilError(t, err)
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	assert.NilError(t, unstructured.SetNestedMap(d.Object, map[string]any{
		"observedGeneration": d.GetGeneration(), "replicas": replicas, "updatedReplicas": replicas,
		"readyReplicas": replicas, "availableReplicas": replicas,
		"conditions": []any{map[string]any{"type": "Available", "status": "True"}, map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}},
	}, "status"))
	_, err = dyn().Resource(deployments).Namespace(ns).UpdateStatus(t.Context(), d, metav1.UpdateOptions{})
	assert.NilError(t, err)
}

func healthOf(res *pipeline.StatusResult) map[string]health.Status {
	out := map[string]health.Status{}
	for _, r := range res.Releases {
		for _, c := range r.Components {
			for _, o := range c.Objects {
				out[o.Kind+"/"+o.Name] = o.Health
			}
		}
	}
	return out
}

func TestStatusReportsIdentityAndHealth(t *testing.T) {
	env.RequireNoControllers(t)
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")
	applied := applyDir(t, dir)
	sel := pipeline.Selection{Dir: dir}

	res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Equal(t, len(res.Releases), 1)
	rs := res.Releases[0]
	assert.Equal(t, rs.Name, "app")
	assert.Equal(t, rs.Namespace, ns)
	assert.Equal(t, rs.ReleaseID, applied.ReleaseID)
	assert.Equal(t, rs.ChangeID, applied.ChangeID)
	assert.Equal(t, rs.Discovery, "inventory")
	assert.Check(t, rs.ModuleID != "")
	assert.Check(t, rs.LastTransitionTime != "")
	assert.Equal(t, len(rs.Components), 1)
	assert.Equal(t, rs.Components[0].Name, "web")
	assert.DeepEqual(t, healthOf(res), map[string]health.Status{
		"Deployment/app": health.InProgress, "Service/app": health.Current, "Secret/app-creds": health.Current,
	})
	assert.Check(t, !res.Healthy)

	markDeploymentReady(t, ns, "app")
	res, err = pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Check(t, res.Healthy, "%v", healthOf(res))

	t.Run("by name and by release id", func(t *testing.T) {
		for _, target := range []pipeline.Target{
			{Name: "app", Namespace: ns},
			{ReleaseID: applied.ReleaseID, Namespace: ns},
		} {
			res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: target, ClusterOptions: cluster(t)})
			assert.NilError(t, err)
			assert.Equal(t, res.Releases[0].ReleaseID, applied.ReleaseID)
			assert.Equal(t, res.Releases[0].Name, "app")
			assert.Check(t, res.Healthy)
		}
	})

	t.Run("missing and terminating", func(t *testing.T) {
		assert.NilError(t, dyn().Resource(services).Namespace(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}))
		s, err := dyn().Resource(secrets).Namespace(ns).Get(t.Context(), "app-creds", metav1.GetOptions{})
		assert.NilError(t, err)
		s.SetFinalizers([]string{"opmodel.dev/test"})
		_, err = dyn().Resource(secrets).Namespace(ns).Update(t.Context(), s, metav1.UpdateOptions{})
		assert.NilError(t, err)
		t.Cleanup(func() {
			s, err := dyn().Resource(secrets).Namespace(ns).Get(t.Context(), "app-creds", metav1.GetOptions{})
			if err == nil {
				s.SetFinalizers(nil)
				_, _ = dyn().Resource(secrets).Namespace(ns).Update(t.Context(), s, metav1.UpdateOptions{})
			}
		})
		assert.NilError(t, dyn().Resource(secrets).Namespace(ns).Delete(t.Context(), "app-creds", metav1.DeleteOptions{}))

		res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Name: "app", Namespace: ns}, ClusterOptions: cluster(t)})
		assert.NilError(t, err)
		assert.DeepEqual(t, healthOf(res), map[string]health.Status{
			"Deployment/app": health.Current, "Service/app": health.Missing, "Secret/app-creds": health.Terminating,
		})
		assert.Check(t, !res.Healthy)
	})
}

func TestStatusWaitsUntilReady(t *testing.T) {
	env.RequireNoControllers(t)
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `withSecret: false`)
	applyDir(t, dir)
	// Play the Deployment controller once status has seen the rollout in
	// progress, whatever the machine's speed.
	seenInProgress := make(chan struct{})
	var once sync.Once
	ready := make(chan error, 1)
	go func() {
		select {
		case <-seenInProgress:
			markDeploymentReady(t, ns, "app")
			ready <- nil
		case <-time.After(30 * time.Second):
			ready <- fmt.Errorf("status never reported the Deployment in progress")
		}
	}()
	var lines []string
	res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{
		Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir}}, ClusterOptions: cluster(t),
		Wait: true, Timeout: 30 * time.Second, Interval: 100 * time.Millisecond,
		Progress: func(release string, h health.ObjectHealth) {
			lines = append(lines, release+" "+h.String())
			if h.Entry.Kind == "Deployment" && h.Status == health.InProgress {
				once.Do(func() { close(seenInProgress) })
			}
		},
	})
	assert.NilError(t, <-ready)
	assert.NilError(t, err)
	assert.Check(t, res.Healthy)
	assert.DeepEqual(t, lines, []string{
		"app service/app: Current",
		"app deployment.apps/app: InProgress (Replicas: 0/1)",
		"app deployment.apps/app: Current",
	})

	res, err = pipeline.Status(t.Context(), pipeline.StatusOptions{
		Target: pipeline.Target{Name: "app", Namespace: ns}, ClusterOptions: cluster(t), Wait: true, Timeout: 300 * time.Millisecond, Interval: 100 * time.Millisecond,
	})
	assert.NilError(t, err, "already healthy: no wait")
	assert.Check(t, res.Healthy)
}

// Without an inventory Secret (applied by an older tool, or deleted),
// status falls back to the label scan.
func TestStatusWithoutInventoryUsesLabels(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")
	applied := applyDir(t, dir)
	assert.NilError(t, dyn().Resource(secrets).Namespace(ns).Delete(t.Context(), inventory.SecretName("app", applied.ReleaseID), metav1.DeleteOptions{}))

	res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Name: "app", Namespace: ns}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Equal(t, res.Releases[0].Discovery, "labels")
	assert.Equal(t, len(healthOf(res)), 3)
}

func TestStatusNeedsNamespaceWithName(t *testing.T) {
	_, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Name: "app"}, ClusterOptions: cluster(t)})
	assert.ErrorContains(t, err, "--namespace is required")
}

// A ghost is labelled for the release but in neither the inventory nor the
// render; an object the render produces that the inventory does not record
// yet belongs to the next apply and is not one.
func TestStatusListsGhostsButNotPendingObjects(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `withSecret: false`)
	applyDir(t, dir)
	pending := deploytest.Values(t, `config: {a: "b"}`)
	createRendered := func(files []string, kind, name string) {
		rels, err := render.Render(t.Context(), render.Options{Dir: dir, ValuesFiles: files})
		assert.NilError(t, err)
		for _, r := range rels[0].Resources {
			if r.Object.GetKind() == kind && r.Object.GetName() == name {
				gvr := schema.GroupVersionResource{Version: "v1", Resource: strings.ToLower(kind) + "s"}
				_, err := dyn().Resource(gvr).Namespace(ns).Create(t.Context(), r.Object.DeepCopy(), metav1.CreateOptions{})
				assert.NilError(t, err)
				return
			}
		}
		t.Fatalf("the render has no %s %s", kind, name)
	}
	createRendered([]string{deploytest.Values(t, `name: "ghost"`)}, "Service", "ghost")
	createRendered([]string{pending}, "ConfigMap", "app-config")

	res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, ValuesFiles: []string{pending}}}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	var ghosts []string
	for _, g := range res.Releases[0].Ghosts {
		ghosts = append(ghosts, g.Kind+"/"+g.Name)
	}
	assert.DeepEqual(t, ghosts, []string{"Service/ghost"})
	assert.Check(t, is.Contains(res.Table(), "Ghosts"))
}
