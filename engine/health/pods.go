package health

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/kube"
)

// workloadKinds are the built-in kinds whose pods say why they are not
// ready: kstatus only sees the workload's counts ("Available: 0/1"),
// while the reason to act on (an image that never pulls, a crash loop, a
// pod no node can take) is on its pods.
var workloadKinds = map[string]bool{
	"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "apps/ReplicaSet": true, "batch/Job": true,
}

// waitingReasons are container waiting reasons that need a person, as
// kubectl describe shows them; ContainerCreating and PodInitializing are
// progress, not problems.
var waitingReasons = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// Explain adds, to each workload in hs that is not Current, the first
// problem its pods report (container waiting reasons such as
// ImagePullBackOff or CrashLoopBackOff, a termination reason such as
// OOMKilled, or an Unschedulable pod), ahead of kstatus's count. found
// are the objects hs judged, in the same order. The pods are listed once
// per namespace, never once per workload, and matched to each workload's
// selector here. Pods that cannot be listed (no permission, the cluster
// blipped) leave the reason as it was: this only ever adds detail.
func Explain(ctx context.Context, cl *kube.Cluster, found []discover.Found, hs []ObjectHealth) {
	pods := map[string][]corev1.Pod{} // by namespace, newest first; nil when not listable
	for i := range hs {
		if hs[i].Status == Current || i >= len(found) || found[i].Object == nil {
			continue
		}
		u := found[i].Object
		if !workloadKinds[u.GroupVersionKind().Group+"/"+u.GetKind()] {
			continue
		}
		why := replicaFailure(u)
		if why == "" {
			sel := selectorOf(u)
			if sel == nil {
				continue
			}
			ns := u.GetNamespace()
			if _, listed := pods[ns]; !listed {
				pods[ns] = listPods(ctx, cl, ns)
			}
			why = podProblem(pods[ns], sel)
		}
		if why != "" {
			hs[i].Reason = strings.TrimSuffix(why+"; "+hs[i].Reason, "; ")
		}
	}
}

// replicaFailure is a workload's own ReplicaFailure condition (pods it
// cannot even create: a missing ServiceAccount, a quota, an admission
// webhook), which the Deployment and ReplicaSet controllers record.
func replicaFailure(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "ReplicaFailure" || m["status"] != "True" {
			continue
		}
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return strings.TrimSuffix(reason+": "+oneLine(msg), ": ")
	}
	return ""
}

// selectorOf is a workload's pod selector, or nil (none, or one that
// selects everything).
func selectorOf(u *unstructured.Unstructured) labels.Selector {
	raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "selector")
	if !ok {
		return nil
	}
	var sel metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &sel); err != nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil || s.Empty() {
		return nil
	}
	return s
}

// listPods lists the pods of namespace ns, newest first (after a change
// they are the ones that matter); nil when they cannot be listed.
func listPods(ctx context.Context, cl *kube.Cluster, ns string) []corev1.Pod {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := cl.Clientset.CoreV1().Pods(ns).List(lctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	return items
}

// podProblem is the first problem a pod sel selects reports, or "".
func podProblem(pods []corev1.Pod, sel labels.Selector) string {
	for i := range pods {
		if !sel.Matches(labels.Set(pods[i].Labels)) {
			continue
		}
		if why := PodProblem(&pods[i]); why != "" {
			return why
		}
	}
	return ""
}

// PodProblem is what keeps one pod from running, in kubectl describe's
// words with the pod and container named ("ImagePullBackOff: Back-off
// pulling image "x" (pod web-5d9f, container web)"), or "".
func PodProblem(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("Unschedulable: %s (pod %s)", oneLine(c.Message), p.Name)
		}
	}
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && waitingReasons[w.Reason] {
			return fmt.Sprintf("%s: %s (pod %s, container %s)", w.Reason, oneLine(w.Message), p.Name, cs.Name)
		}
		if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 && !cs.Ready {
			return fmt.Sprintf("%s: exit code %d after %d restarts (pod %s, container %s)", t.Reason, t.ExitCode, cs.RestartCount, p.Name, cs.Name)
		}
	}
	return ""
}

// oneLine keeps a message on one short line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Since is when the object last became (or stopped being) ready, as its
// readiness conditions record it (the latest lastTransitionTime of
// readinessConditions); zero when it has none. Other conditions move on
// their own and say nothing about health: an HPA's ScalingActive turns
// True once metrics arrive, half a minute after a healthy rollout, and
// counting it restarted every soak. Nor does a scale: a Deployment's
// Available dips and returns with every scale-up, so while opm does not
// own its spec.replicas (the release leaves the count to an autoscaler, or
// kubectl scale took it) a busy autoscaler would hold a soak shut; it is
// not counted then.
func Since(u *unstructured.Unstructured) time.Time {
	var latest time.Time
	scaledByOthers := u.GetKind() == "Deployment" && !opmOwnsReplicas(u)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		if !slices.Contains(readinessConditions[:], typ) || (typ == "Available" && scaledByOthers) {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(latest) {
			latest = t
		}
	}
	return latest
}

// readinessConditions are the condition types whose transition is a
// change of health: a Deployment's Available and ReplicaFailure, Ready
// (pods and most custom resources, the kstatus convention), a Job's
// Complete and Failed, a CRD's Established.
var readinessConditions = [...]string{"Available", "ReplicaFailure", "Ready", "Complete", "Failed", "Established"}

// opmFieldManager is the server-side apply manager opm writes with
// (engine/objects.FieldManager).
const opmFieldManager = "opm"

// opmOwnsReplicas reports whether opm's field manager owns spec.replicas:
// the release sets the count. A scale through the scale subresource is not
// always recorded as another manager's, so ownership is read from opm's
// side.
func opmOwnsReplicas(u *unstructured.Unstructured) bool {
	for _, mf := range u.GetManagedFields() {
		if mf.Manager != opmFieldManager || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields["f:spec"]["f:replicas"]; ok {
			return true
		}
	}
	return false
}
