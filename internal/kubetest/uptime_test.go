package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// UptimeWindow is how long TestPlaneStaysUp watches a plane: longer than
// the node lifecycle controller's startup and monitor grace periods
// together, so a node whose heartbeat lapses is caught.
const UptimeWindow = 3 * time.Minute

// A plane stays up: for three minutes every simulated node stays Ready
// and a healthy Deployment stays Current, as a kubelet's node would. (It
// used to flap about every 55 s: nothing renewed the node Leases.) The
// window is the behaviour under test, so the test watches it to the end;
// it runs beside the package's other tests.
func TestPlaneStaysUp(t *testing.T) {
	t.Parallel()
	e, err := Start()
	assert.NilError(t, err)
	t.Cleanup(func() { _ = e.Stop() })
	if !e.Controllers() {
		t.Skip("no simulated nodes without the local controllers")
	}
	cs := kubernetes.NewForConfigOrDie(e.Config)
	ns := e.Namespace(t)
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "steady"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "steady"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: ReadyImage}}}}},
	}
	_, err = cs.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{})
	assert.NilError(t, err)
	current := func(ctx context.Context) string {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "steady", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
		if err != nil {
			return err.Error()
		}
		res, err := status.Compute(&unstructured.Unstructured{Object: u})
		if err != nil {
			return err.Error()
		}
		if res.Status != status.CurrentStatus {
			return fmt.Sprintf("Deployment steady is %s: %s", res.Status, res.Message)
		}
		return ""
	}
	// A flap can be over between two looks (kwok makes a node Ready again
	// at once), so a node counts as steady only while its Ready condition
	// keeps the transition time it had when the window opened.
	since := map[string]metav1.Time{}
	notReady := func(ctx context.Context) string {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				if c.Status != corev1.ConditionTrue {
					return fmt.Sprintf("node %s is %s (%s)", n.Name, c.Status, c.Reason)
				}
				if first, ok := since[n.Name]; !ok {
					since[n.Name] = c.LastTransitionTime
				} else if !first.Equal(&c.LastTransitionTime) {
					return fmt.Sprintf("node %s went NotReady and back (Ready since %s, not %s)", n.Name, c.LastTransitionTime.Format(time.TimeOnly), first.Format(time.TimeOnly))
				}
			}
		}
		return ""
	}
	// First, the Deployment becomes Current.
	deadline := time.Now().Add(time.Minute)
	for msg := current(t.Context()); msg != ""; msg = current(t.Context()) {
		assert.Assert(t, time.Now().Before(deadline), "never healthy: %s", msg)
		waitTick(t)
	}
	// Then nothing may flap for the whole window.
	end := time.Now().Add(UptimeWindow)
	checks := 0
	for time.Now().Before(end) {
		for _, check := range []func(context.Context) string{notReady, current} {
			if msg := check(t.Context()); msg != "" {
				t.Fatalf("after %s of %s: %s", time.Until(end).Round(time.Second), UptimeWindow, msg)
			}
		}
		checks++
		waitTick(t)
	}
	t.Logf("%d checks over %s: every node Ready, the Deployment Current", checks, UptimeWindow)
}

// waitTick waits one polling interval, or fails when the test ends first.
func waitTick(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
}
