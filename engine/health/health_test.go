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

func podTemplate(app, restartPolicy, image string, command ...string) map[string]any {
	c := map[string]any{"name": "c", "image": image}
	if len(command) > 0 {
		cmd := make([]any, len(command))
		for i, a := range command {
			cmd[i] = a
		}
		c["command"] = cmd
	}
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": app}},
		"spec": map[string]any{
			"restartPolicy": restartPolicy,
			// A real kubelet would wait 30s for the container to stop.
			"terminationGracePeriodSeconds": int64(0),
			"containers":                    []any{c},
		},
	}
}

// deployment has 2 replicas of image (kubetest.ReadyImage: they become
// Ready; kubetest.FailingImage: they never do).
func deployment(ns, name, image string) *unstructured.Unstructured {
	return obj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
		"replicas": int64(2),
		"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
		"template": podTemplate(name, "Always", image),
	}})
}

func statefulSet(ns, name, image string) *unstructured.Unstructured {
	return obj("apps/v1", "StatefulSet", ns, name, map[string]any{"spec": map[string]any{
		"replicas":    int64(2),
		"serviceName": name,
		"selector":    map[string]any{"matchLabels": map[string]any{"app": name}},
		"template":    podTemplate(name, "Always", image),
	}})
}

// job runs one pod to completion.
func job(ns, name string) *unstructured.Unstructured {
	return obj("batch/v1", "Job", ns, name, map[string]any{"spec": map[string]any{
		"backoffLimit": int64(0),
		"template":     podTemplate(name, "Never", kubetest.JobImage, "true"),
	}})
}

// failingJob's pod never pulls its image, so the Job controller fails the
// Job when its one-second deadline passes.
func failingJob(ns, name string) *unstructured.Unstructured {
	return obj("batch/v1", "Job", ns, name, map[string]any{"spec": map[string]any{
		"backoffLimit":          int64(0),
		"activeDeadlineSeconds": int64(1),
		"template":              podTemplate(name, "Never", kubetest.FailingImage),
	}})
}

// waitUntil polls e's health until it has status want and its reason
// contains reason, for at most a minute (a rollout on kwok's nodes takes
// about a second; on kind, an image pull).
func waitUntil(t *testing.T, cl *kube.Cluster, e inventory.Entry, want Status, reason string) ObjectHealth {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h := checkOne(t, cl, e)
		if h.Status == want && strings.Contains(h.Reason, reason) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become %s (%q) within a minute: %s", e.Name, want, reason, h)
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// writeStatus plays a controller on a plane without controllers
// (Env.WithoutControllers): it sets the object's status through the
// status subresource. status may use the
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
	cl := cluster(t)
	ns := env.Namespace(t)

	for _, u := range []*unstructured.Unstructured{
		deployment(ns, "web", kubetest.ReadyImage),
		statefulSet(ns, "db", kubetest.ReadyImage),
	} {
		t.Run(u.GetKind(), func(t *testing.T) {
			e := create(t, cl, u)
			h := checkOne(t, cl, e)
			assert.Equal(t, h.Status, InProgress, "just created: %s", h.Reason)
			assert.Check(t, h.Reason != "")

			h = waitUntil(t, cl, e, Current, "")
			assert.Equal(t, h.String(), strings.ToLower(u.GetKind())+".apps/"+u.GetName()+": Current")

			// A new template rolls out again and ends Current again.
			patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"rollout":"2"}}}}}`)
			_, err := resource(t, cl, u).Patch(t.Context(), u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
			assert.NilError(t, err)
			waitUntil(t, cl, e, Current, "")
		})
	}

	t.Run("image that never pulls", func(t *testing.T) {
		e := create(t, cl, deployment(ns, "broken", kubetest.FailingImage))
		// Once the nodes report the pull failure, a wait that times out
		// names it, with the pod and container, before kstatus's count.
		kubetest.WaitForPodReason(t, cl.Clientset, ns, "ImagePullBackOff")
		_, err := Wait(t.Context(), cl, []inventory.Entry{e}, WaitOptions{Interval: 100 * time.Millisecond, Timeout: time.Second})
		var werr *WaitError
		assert.Assert(t, errors.As(err, &werr), "got %v", err)
		assert.Equal(t, len(werr.Pending), 1)
		assert.Equal(t, werr.Pending[0].Status, InProgress)
		got := werr.Pending[0].String()
		assert.Check(t, strings.HasPrefix(got, `deployment.apps/broken: InProgress (ImagePullBackOff: Back-off pulling image "`+kubetest.FailingImage+`" (pod broken-`), got)
		assert.Check(t, strings.HasSuffix(got, ", container c); Available: 0/2)"), got)
		// status (Check then Explain) says the same.
		found, _, err := discover.FromInventory(t.Context(), cl, []inventory.Entry{e}, discover.Options{})
		assert.NilError(t, err)
		hs := Check(found)
		Explain(t.Context(), cl, found, hs)
		assert.Equal(t, hs[0].Reason[:len("ImagePullBackOff: ")], "ImagePullBackOff: ")
	})
}

// These states are real but fleeting: a spec the controller has not
// observed yet lasts milliseconds, and a StatefulSet with one of two pods
// ready needs one pod of a template to fail and the other not. Writing
// status by hand, on a control plane whose controllers cannot overwrite
// it, is the only way to hold them still.
func TestHealthOfHandWrittenStatus(t *testing.T) {
	bare := env.WithoutControllers(t)
	cl, err := kube.FromConfig(bare.Config, "test", kube.Options{})
	assert.NilError(t, err)
	ns := bare.Namespace(t)

	for _, tc := range []struct {
		object *unstructured.Unstructured
		status map[string]any
	}{
		{deployment(ns, "web", kubetest.ReadyImage), readyDeployment()},
		{statefulSet(ns, "db", kubetest.ReadyImage), readyStatefulSet()},
	} {
		t.Run(tc.object.GetKind()+" not yet observed", func(t *testing.T) {
			e := create(t, cl, tc.object)
			assert.NilError(t, writeStatus(t.Context(), cl, tc.object, tc.status))
			assert.Equal(t, checkOne(t, cl, e).Status, Current)

			// A new spec the controller has not seen yet: the counts of the
			// old rollout say nothing about it.
			patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"rollout":"2"}}}}}`)
			_, err := resource(t, cl, tc.object).Patch(t.Context(), tc.object.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
			assert.NilError(t, err)
			h := checkOne(t, cl, e)
			assert.Equal(t, h.Status, InProgress)
			assert.Check(t, is.Contains(h.Reason, "observed generation"))

			assert.NilError(t, writeStatus(t.Context(), cl, tc.object, tc.status))
			assert.Equal(t, checkOne(t, cl, e).Status, Current)
		})
	}

	t.Run("statefulset short of ready replicas", func(t *testing.T) {
		u := statefulSet(ns, "cache", kubetest.ReadyImage)
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
	cl := cluster(t)
	ns := env.Namespace(t)

	t.Run("complete", func(t *testing.T) {
		u := job(ns, "migrate")
		e := create(t, cl, u)
		// kstatus counts a Job as Current once started ("Job in progress"),
		// which the controller does at once; it ends "Job Completed".
		waitUntil(t, cl, e, Current, "Completed")
	})
	t.Run("failed", func(t *testing.T) {
		e := create(t, cl, failingJob(ns, "broken"))
		h := waitUntil(t, cl, e, Failed, "")
		assert.Equal(t, h.String(), "job.batch/broken: Failed (Job Failed. failed: 1/1)")
	})
}

func TestHealthOfMissingTerminatingAndPlainObjects(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)

	cm := create(t, cl, configMap(ns, "settings"))
	h := checkOne(t, cl, cm)
	assert.Equal(t, h.Status, Current)

	gone := inventory.Entry{ID: manifest.ID{Kind: "ConfigMap", Namespace: ns, Name: "gone"}, V: "v1"}
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
	cl := cluster(t)
	ns := env.Namespace(t)
	refs := []inventory.Entry{create(t, cl, configMap(ns, "settings")), create(t, cl, deployment(ns, "web", kubetest.ReadyImage))}

	var lines []string
	hs, err := Wait(t.Context(), cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: time.Minute, OnChange: func(h ObjectHealth) {
		lines = append(lines, h.String())
	}})
	assert.NilError(t, err)
	assert.Check(t, Healthy(hs))
	// What the rollout passes through depends on timing; how it starts
	// and ends does not. The ConfigMap, Current from the start, is not
	// reported: transitions only.
	assert.Assert(t, len(lines) >= 2, "%v", lines)
	assert.Check(t, is.Contains(lines[0], "deployment.apps/web: InProgress ("), "%v", lines)
	assert.Equal(t, lines[len(lines)-1], "deployment.apps/web: Current")
	for _, l := range lines {
		assert.Check(t, !strings.Contains(l, "configmap/settings"), "a healthy object was reported: %v", lines)
	}
}

func TestWaitTimesOutNamingWhatIsNotReady(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	refs := []inventory.Entry{
		create(t, cl, configMap(ns, "settings")),
		create(t, cl, deployment(ns, "web", kubetest.FailingImage)),
		{ID: manifest.ID{Kind: "ConfigMap", Namespace: ns, Name: "never-created"}, V: "v1"},
	}

	kubetest.WaitForPodReason(t, cl.Clientset, ns, "ImagePullBackOff")
	start := time.Now()
	hs, err := Wait(t.Context(), cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: time.Second})
	elapsed := time.Since(start)
	var werr *WaitError
	assert.Assert(t, errors.As(err, &werr), "got %v", err)
	assert.Check(t, elapsed >= time.Second, "gave up after %s, before its 1 s timeout", elapsed)
	assert.Equal(t, len(hs), 3)
	assert.Equal(t, len(werr.Pending), 2)
	msg := err.Error()
	assert.Check(t, strings.HasPrefix(msg, "timed out after 1s waiting for 2 of 3 objects to become Current: "+
		`deployment.apps/web: InProgress (ImagePullBackOff: Back-off pulling image "`+kubetest.FailingImage+`" (pod web-`), msg)
	assert.Check(t, strings.HasSuffix(msg, "; Available: 0/2); configmap/never-created: Missing (not found on the cluster)"), msg)
}

func TestWaitStopsAtTheFirstFailure(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	refs := []inventory.Entry{create(t, cl, deployment(ns, "web", kubetest.FailingImage)), create(t, cl, failingJob(ns, "broken"))}

	_, err := Wait(t.Context(), cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: 10 * time.Minute})
	var werr *WaitError
	assert.Assert(t, errors.As(err, &werr), "got %v", err)
	// The failure, not the timeout (which would say "timed out"), ended it.
	assert.Equal(t, err.Error(), "1 of 2 objects failed: job.batch/broken: Failed (Job Failed. failed: 1/1)")
}

func TestWaitHonoursTheCallersContext(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	refs := []inventory.Entry{create(t, cl, deployment(ns, "web", kubetest.FailingImage))}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, cl, refs, WaitOptions{Interval: 100 * time.Millisecond, Timeout: 0})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}

// Status explains workloads by their pods with one pod LIST per
// namespace, however many workloads are not ready there: three broken
// Deployments in one namespace, each told its own pod's problem.
func TestExplainListsPodsOncePerNamespace(t *testing.T) {
	cl := cluster(t)
	ns := env.Namespace(t)
	names := []string{"one", "two", "three"}
	var entries []inventory.Entry
	for _, n := range names {
		entries = append(entries, create(t, cl, deployment(ns, n, kubetest.FailingImage)))
	}
	// Until every Deployment has a pod that reports the pull failure.
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := cl.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		failing := map[string]bool{}
		for _, p := range pods.Items {
			if PodProblem(&p) != "" {
				failing[p.Labels["app"]] = true
			}
		}
		if len(failing) == len(names) {
			break
		}
		assert.Assert(t, time.Now().Before(deadline), "pods failing after a minute: %v", failing)
		time.Sleep(200 * time.Millisecond)
	}
	found, _, err := discover.FromInventory(t.Context(), cl, entries, discover.Options{})
	assert.NilError(t, err)
	hs := Check(found)
	cfg, requests := kubetest.CountingConfig(env.Config)
	counted, err := kube.FromConfig(cfg, "test", kube.Options{})
	assert.NilError(t, err)
	requests.Store(0)
	Explain(t.Context(), counted, found, hs)
	assert.Equal(t, requests.Load(), int64(1), "requests to explain %d workloads of one namespace", len(names))
	for i, h := range hs {
		assert.Check(t, strings.HasPrefix(h.Reason, "ImagePullBackOff: "), "%s: %s", names[i], h.Reason)
		assert.Check(t, strings.Contains(h.Reason, "(pod "+names[i]+"-"), "%s is explained by another's pod: %s", names[i], h.Reason)
	}
}
