package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

func cluster(t *testing.T) *kube.Cluster {
	t.Helper()
	cl, err := kube.FromConfig(env.Config, "test", kube.Options{})
	assert.NilError(t, err)
	return cl
}

func obj(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name, "namespace": namespace}}
	for k, v := range fields {
		u[k] = v
	}
	return &unstructured.Unstructured{Object: u}
}

func podTemplate(app, restartPolicy string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": app}},
		"spec": map[string]any{
			"restartPolicy": restartPolicy,
			"containers":    []any{map[string]any{"name": "c", "image": "nginx"}},
		},
	}
}

func deployment(ns, name string) *unstructured.Unstructured {
	return obj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
		"replicas": int64(2),
		"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
		"template": podTemplate(name, "Always"),
	}})
}

func statefulSet(ns, name string) *unstructured.Unstructured {
	return obj("apps/v1", "StatefulSet", ns, name, map[string]any{"spec": map[string]any{
		"replicas":    int64(2),
		"serviceName": name,
		"selector":    map[string]any{"matchLabels": map[string]any{"app": name}},
		"template":    podTemplate(name, "Always"),
	}})
}

func job(ns, name string) *unstructured.Unstructured {
	return obj("batch/v1", "Job", ns, name, map[string]any{"spec": map[string]any{
		"template": podTemplate(name, "Never"),
	}})
}

func configMap(ns, name string) *unstructured.Unstructured {
	return obj("v1", "ConfigMap", ns, name, map[string]any{"data": map[string]any{"k": "v"}})
}

func resource(t *testing.T, cl *kube.Cluster, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	assert.NilError(t, err)
	return cl.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace())
}

// create creates u and returns its inventory entry.
func create(t *testing.T, cl *kube.Cluster, u *unstructured.Unstructured) inventory.Entry {
	t.Helper()
	_, err := resource(t, cl, u).Create(t.Context(), u, metav1.CreateOptions{})
	assert.NilError(t, err, "create %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	return inventory.EntryOf(manifest.Resource{Object: u, Component: "app"})
}

// writeStatus does what the missing controllers would: it sets the
// object's status through the status subresource. status may use the
// placeholder value "$generation" for the object's current generation.
func writeStatus(ctx context.Context, cl *kube.Cluster, u *unstructured.Unstructured, status map[string]any) error {
	ri, err := resourceOf(cl, u)
	if err != nil {
		return err
	}
	live, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	status = deepCopyStatus(status)
	if status["observedGeneration"] == "$generation" {
		status["observedGeneration"] = live.GetGeneration()
	}
	live.Object["status"] = status
	_, err = ri.UpdateStatus(ctx, live, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("write status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

func resourceOf(cl *kube.Cluster, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	return cl.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()), nil
}

func deepCopyStatus(s map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: map[string]any{"status": s}}).DeepCopy().Object["status"].(map[string]any)
}

const now = "2025-01-01T00:00:00Z"

// readyDeployment is a rolled-out Deployment of 2 replicas, as the
// deployment controller reports it.
func readyDeployment() map[string]any {
	return map[string]any{
		"observedGeneration": "$generation",
		"replicas":           int64(2), "updatedReplicas": int64(2), "readyReplicas": int64(2), "availableReplicas": int64(2),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastUpdateTime": now, "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastUpdateTime": now, "lastTransitionTime": now},
		},
	}
}

// readyStatefulSet has no Available condition, like every real
// StatefulSet: readiness is in its replica counts and revisions.
func readyStatefulSet() map[string]any {
	return map[string]any{
		"observedGeneration": "$generation",
		"replicas":           int64(2), "readyReplicas": int64(2), "currentReplicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2),
		"currentRevision": "web-1", "updateRevision": "web-1",
	}
}

func checkOne(t *testing.T, cl *kube.Cluster, e inventory.Entry) ObjectHealth {
	t.Helper()
	found, _, err := discover.FromInventory(t.Context(), cl, []inventory.Entry{e}, discover.Options{})
	assert.NilError(t, err)
	hs := Check(found)
	assert.Equal(t, len(hs), 1)
	assert.Equal(t, hs[0].Entry, e)
	return hs[0]
}

func TestHealthOfWorkloads(t *testing.T) {
	env.RequireNoControllers(t)
	cl := cluster(t)
	ns := env.Namespace(t)

	for _, tc := range []struct {
		name   string
		object *unstructured.Unstructured
		status map[string]any
	}{
		{"deployment", deployment(ns, "web"), readyDeployment()},
		{"statefulset", statefulSet(ns, "db"), readyStatefulSet()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := create(t, cl, tc.object)
			h := checkOne(t, cl, e)
			assert.Equal(t, h.Status, InProgress, "before any status: %s", h.Reason)
			assert.Check(t, h.Reason != "")

			assert.NilError(t, writeStatus(t.Context(), cl, tc.object, tc.status))
			h = checkOne(t, cl, e)
			assert.Equal(t, h.Status, Current, h.Reason)

			// A new spec the controller has not seen yet: the counts of the
			// old rollout say nothing about it.
			patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"rollout":"2"}}}}}`)
			_, err := resource(t, cl, tc.object).Patch(t.Context(), tc.object.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
			assert.NilError(t, err)
			h = checkOne(t, cl, e)
			assert.Equal(t, h.Status, InProgress)
			assert.Check(t, is.Contains(h.Reason, "observed generation"))

			assert.NilError(t, writeStatus(t.Context(), cl, tc.object, tc.status))
			h = checkOne(t, cl, e)
			assert.Equal(t, h.Status, Current, h.Reason)
			assert.Equal(t, h.String(), strings.ToLower(tc.object.GetKind())+".apps/"+tc.object.GetName()+": Current")
		})
	}

	t.Run("statefulset short of ready replicas", func(t *testing.T) {
		u := statefulSet(ns, "cache")
		e := create(t, cl, u)
		st := readyStatefulSet()
		st["readyReplicas"] = int64(1)
		st["availableReplicas"] = int64(1)
		assert.NilError(t, writeStatus(t.Context(), cl, u, st))
		h := checkOne(t, cl, e)
		assert.Equal(t, h.Status, InProgress)
		assert.Equal(t, h.Reason, "Ready: 1/2")
		assert.Equal(t, h.String(), "statefulset.apps/cache: InProgress (Ready: 1/2)")
	})
}

func TestHealthOfJobs(t *testing.T) {
	env.RequireNoControllers(t)
	cl := cluster(t)
	ns := env.Namespace(t)
	start := map[string]any{"startTime": now}

	t.Run("complete", func(t *testing.T) {
		u := job(ns, "migrate")
		e := create(t, cl, u)
		assert.Equal(t, checkOne(t, cl, e).Status, InProgress)
		assert.NilError(t, writeStatus(t.Context(), cl, u, start))
		assert.NilError(t, writeStatus(t.Context(), cl, u, map[string]any{
			"startTime": now, "completionTime": now, "succeeded": int64(1),
			"conditions": []any{
				map[string]any{"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
				map[string]any{"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
			},
		}))
		h := checkOne(t, cl, e)
		assert.Equal(t, h.Status, Current, h.Reason)
		assert.Check(t, is.Contains(h.Reason, "Completed"))
	})
	t.Run("failed", func(t *testing.T) {
		u := job(ns, "broken")
		e := create(t, cl, u)
		assert.NilError(t, writeStatus(t.Context(), cl, u, start))
		assert.NilError(t, writeStatus(t.Context(), cl, u, failedJob()))
		h := checkOne(t, cl, e)
		assert.Equal(t, h.Status, Failed, h.Reason)
		assert.Equal(t, h.String(), "job.batch/broken: Failed (Job Failed. failed: 1/1)")
	})
}

func failedJob() map[string]any {
	return map[string]any{
		"startTime": now, "failed": int64(1),
		"conditions": []any{
			map[string]any{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastProbeTime": now, "lastTransitionTime": now},
			map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastProbeTime": now, "lastTransitionTime": now},
		},
	}
}

func TestHealthOfMissingTerminatingAndPlainObjects(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)

	cm := create(t, cl, configMap(ns, "settings"))
	h := checkOne(t, cl, cm)
	assert.Equal(t, h.Status, Current)

	gone := inventory.Entry{Kind: "ConfigMap", Namespace: ns, Name: "gone", V: "v1"}
	h = checkOne(t, cl, gone)
	assert.Equal(t, h.Status, Missing)
	assert.Equal(t, h.String(), "configmap/gone: Missing (not found on the cluster)")

	// Deletion waits on the finalizer, leaving the object Terminating.
	u := configMap(ns, "held")
	u.SetFinalizers([]string{"opmodel.dev/test-hold"})
	held := create(t, cl, u)
	ri := resource(t, cl, u)
	t.Cleanup(func() {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_, err := ri.Patch(context.Background(), "held", types.MergePatchType, patch, metav1.PatchOptions{})
		assert.Check(t, err)
	})
	assert.NilError(t, ri.Delete(t.Context(), "held", metav1.DeleteOptions{}))
	h = checkOne(t, cl, held)
	assert.Equal(t, h.Status, Terminating)
	assert.Check(t, h.Reason != "")

	assert.Check(t, !Healthy([]ObjectHealth{{Status: Current}, {Status: Missing}}))
	assert.Check(t, Healthy([]ObjectHealth{{Status: Current}}))
}

func TestWaitReturnsOnceTheRolloutCompletes(t *testing.T) {
	env.RequireNoControllers(t)
	cl := cluster(t)
	ns := env.Namespace(t)
	web := deployment(ns, "web")
	refs := []inventory.Entry{create(t, cl, configMap(ns, "settings")), create(t, cl, web)}

	// The "controller" finishes the rollout a little later.
	done := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		done <- writeStatus(context.Background(), cl, web, readyDeployment())
	}()

	var lines []string
	start := time.Now()
	hs, err := Wait(t.Context(), cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: 30 * time.Second, OnChange: func(h ObjectHealth) {
		lines = append(lines, h.String())
	}})
	assert.NilError(t, <-done)
	assert.NilError(t, err)
	assert.Check(t, time.Since(start) >= 500*time.Millisecond)
	assert.Check(t, Healthy(hs))
	assert.DeepEqual(t, lines, []string{
		"configmap/settings: Current",
		"deployment.apps/web: InProgress (Replicas: 0/2)",
		"deployment.apps/web: Current",
	})
}

func TestWaitTimesOutNamingWhatIsNotReady(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	refs := []inventory.Entry{
		create(t, cl, configMap(ns, "settings")),
		create(t, cl, deployment(ns, "web")),
		{Kind: "ConfigMap", Namespace: ns, Name: "never-created", V: "v1"},
	}

	start := time.Now()
	hs, err := Wait(t.Context(), cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: time.Second})
	elapsed := time.Since(start)
	var werr *WaitError
	assert.Assert(t, errors.As(err, &werr), "got %v", err)
	assert.Check(t, elapsed >= time.Second && elapsed < 10*time.Second, "waited %s", elapsed)
	assert.Equal(t, len(hs), 3)
	assert.Equal(t, len(werr.Pending), 2)
	assert.Equal(t, err.Error(), "timed out after 1s waiting for 2 of 3 objects to become Current: "+
		"deployment.apps/web: InProgress (Replicas: 0/2); configmap/never-created: Missing (not found on the cluster)")
}

func TestWaitStopsAtTheFirstFailure(t *testing.T) {
	env.RequireNoControllers(t)
	cl := cluster(t)
	ns := env.Namespace(t)
	u := job(ns, "broken")
	refs := []inventory.Entry{create(t, cl, deployment(ns, "web")), create(t, cl, u)}
	assert.NilError(t, writeStatus(t.Context(), cl, u, map[string]any{"startTime": now}))
	assert.NilError(t, writeStatus(t.Context(), cl, u, failedJob()))

	start := time.Now()
	_, err := Wait(t.Context(), cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: time.Minute})
	var werr *WaitError
	assert.Assert(t, errors.As(err, &werr), "got %v", err)
	assert.Check(t, time.Since(start) < 10*time.Second)
	assert.Equal(t, err.Error(), "1 of 2 objects failed: job.batch/broken: Failed (Job Failed. failed: 1/1)")
}

func TestWaitHonoursTheCallersContext(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	refs := []inventory.Entry{create(t, cl, deployment(ns, "web"))}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: 0})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}
