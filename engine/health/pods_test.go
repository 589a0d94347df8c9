package health

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each reason a person must act on is named with its pod and container;
// progress (ContainerCreating) and a running pod are not problems.
func TestPodProblemNamesWhatToFix(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"image", waiting("ImagePullBackOff", `Back-off pulling image "x"`), `ImagePullBackOff: Back-off pulling image "x" (pod web-1, container web)`},
		{"crash", waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container"), "CrashLoopBackOff: back-off 5m0s restarting failed container (pod web-1, container web)"},
		{"config", waiting("CreateContainerConfigError", `secret "db" not found`), `CreateContainerConfigError: secret "db" not found (pod web-1, container web)`},
		{"progress", waiting("ContainerCreating", ""), ""},
		{"unschedulable", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available:\n 3 Insufficient memory."}}}},
			"Unschedulable: 0/3 nodes are available: 3 Insufficient memory. (pod web-2)"},
		{"oom", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-3"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "web", RestartCount: 4, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}},
			"OOMKilled: exit code 137 after 4 restarts (pod web-3, container web)"},
		{"running", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-4"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, PodProblem(tc.pod), tc.want)
		})
	}
}

func TestReplicaFailureAndSince(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Available", "status": "False", "lastTransitionTime": "2026-11-26T10:00:00Z"},
		map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": `pods "web-1" is forbidden: serviceaccount "x" not found`, "lastTransitionTime": "2026-11-26T10:05:00Z"},
	}}}}
	assert.Equal(t, replicaFailure(u), `FailedCreate: pods "web-1" is forbidden: serviceaccount "x" not found`)
	assert.Equal(t, Since(u), time.Date(2026, 11, 26, 10, 5, 0, 0, time.UTC))
	assert.Assert(t, Since(&unstructured.Unstructured{Object: map[string]any{}}).IsZero())
}

// The health clock counts readiness transitions only: an HPA's
// ScalingActive turning True half a minute after a healthy rollout, or a
// Deployment's Progressing moving, does not restart a soak.
func TestSinceCountsReadinessTransitionsOnly(t *testing.T) {
	t1 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(30 * time.Second)
	obj := func(conds ...map[string]any) *unstructured.Unstructured {
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": cs}}}
	}
	cond := func(typ string, at time.Time) map[string]any {
		return map[string]any{"type": typ, "status": "True", "lastTransitionTime": at.Format(time.RFC3339)}
	}
	assert.Equal(t, Since(obj(cond("Available", t1), cond("Progressing", t2))), t1)
	assert.Check(t, Since(obj(cond("AbleToScale", t1), cond("ScalingActive", t2))).IsZero(), "an HPA's conditions are no health clock")
	assert.Equal(t, Since(obj(cond("Ready", t2))), t2)
	assert.Equal(t, Since(obj(cond("Complete", t1))), t1)
}
