package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	secrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

func dyn() dynamic.Interface { return dynamic.NewForConfigOrDie(env.Config()) }

// readyImage is a values file that gives the release's Deployment an
// image that runs, so the controllers roll it out (deploytest's default
// image never pulls).
func readyImage(t *testing.T) string {
	return deploytest.Values(t, fmt.Sprintf("image: %q", kubetest.ReadyImage))
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
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")
	// deploytest's image never pulls: the Deployment stays InProgress.
	applyDir(t, dir)
	sel := pipeline.Selection{Dir: dir}

	res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.DeepEqual(t, healthOf(res), map[string]health.Status{
		"Deployment/app": health.InProgress, "Service/app": health.Current, "Secret/app-creds": health.Current,
	})
	assert.Check(t, !res.Healthy)

	// With an image that runs, the controllers roll it out.
	ready := readyImage(t)
	applied := applyDir(t, dir, ready)
	sel.ValuesFiles = []string{ready}
	res, err = pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: cluster(t), Wait: true, Timeout: time.Minute, Interval: 100 * time.Millisecond})
	assert.NilError(t, err)
	assert.Check(t, res.Healthy, "%v", healthOf(res))
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

// status --wait follows a rollout that is fixed while it waits: the
// first apply's image never pulls, the second's runs.
func TestStatusWaitsUntilReady(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `withSecret: false`)
	applyDir(t, dir)
	ready := readyImage(t)
	// Fix the image once status has seen the rollout stuck, whatever the
	// machine's speed.
	seenInProgress := make(chan struct{})
	var once sync.Once
	fixed := make(chan error, 1)
	go func() {
		select {
		case <-seenInProgress:
			fixed <- apply(t.Context(), dir, ready)
		case <-time.After(30 * time.Second):
			fixed <- fmt.Errorf("status never reported the Deployment in progress")
		}
	}()
	var lines []string
	res, err := pipeline.Status(t.Context(), pipeline.StatusOptions{
		Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, ValuesFiles: []string{ready}}}, ClusterOptions: cluster(t),
		Wait: true, Timeout: time.Minute, Interval: 100 * time.Millisecond,
		Progress: func(release string, h health.ObjectHealth) {
			lines = append(lines, release+" "+h.String())
			if h.Entry.Kind == "Deployment" && h.Status == health.InProgress {
				once.Do(func() { close(seenInProgress) })
			}
		},
	})
	assert.NilError(t, <-fixed)
	assert.NilError(t, err)
	assert.Check(t, res.Healthy)
	// The steps of the rollout in between depend on timing.
	// The Service, healthy from the start, is no line of progress.
	assert.Assert(t, len(lines) >= 2, "%v", lines)
	assert.Check(t, strings.HasPrefix(lines[0], "app deployment.apps/app: InProgress ("), "%v", lines)
	assert.Equal(t, lines[len(lines)-1], "app deployment.apps/app: Current")
	for _, l := range lines {
		assert.Check(t, !strings.Contains(l, "service/app"), "%v", lines)
	}

	res, err = pipeline.Status(t.Context(), pipeline.StatusOptions{
		Target: pipeline.Target{Name: "app", Namespace: ns}, ClusterOptions: cluster(t), Wait: true, Timeout: 300 * time.Millisecond, Interval: 100 * time.Millisecond,
	})
	assert.NilError(t, err, "already healthy: no wait")
	assert.Check(t, res.Healthy)
}

// apply is applyDir for goroutines other than the test's: it returns
// the error instead of failing the test.
func apply(ctx context.Context, dir string, files ...string) error {
	rels, err := render.Render(ctx, render.Options{Dir: dir, ValuesFiles: files})
	if err != nil {
		return err
	}
	cl, err := kube.FromConfig(env.Config(), "opm-test", kube.Options{})
	if err != nil {
		return err
	}
	_, err = reconcile.Apply(ctx, cl, rels[0], reconcile.Options{})
	return err
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
	assert.Equal(t, len(healthOf(res)), 3, "%v", healthOf(res))
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
	assert.Check(t, is.Contains(report.StatusTable(res), "Ghosts"))
}
