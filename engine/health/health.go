// Package health judges whether a release's objects are ready, for
// `opm status` and `--wait`.
//
// Judgement is kstatus's (sigs.k8s.io/cli-utils/pkg/kstatus/status), which
// knows each built-in workload's own readiness rules — StatefulSets by
// replica counts and revisions, not by an Available condition they never
// have (the peer tool's mistake) — and the standard conditions of custom
// resources. Its result is mapped to five states: Current, InProgress,
// Failed, Missing (the object does not exist) and Terminating (deletion
// has begun), each with kstatus's short reason.
//
// Check judges objects already fetched; Wait fetches repeatedly until every
// object is Current, one Failed, or time runs out.
package health

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
)

// Status is an object's health.
type Status string

// The health states.
const (
	Current     Status = "Current"
	InProgress  Status = "InProgress"
	Failed      Status = "Failed"
	Missing     Status = "Missing"
	Terminating Status = "Terminating"
)

// ObjectHealth is one object's health.
type ObjectHealth struct {
	Entry  inventory.Entry `json:"object"`
	Status Status          `json:"status"`
	// Reason says why, in kstatus's words ("Ready: 0/3").
	Reason string `json:"reason,omitempty"`
	// Since is when the object last changed state (Since); zero when its
	// status records no transition.
	Since time.Time `json:"-"`
}

// Ref names the object as kubectl's progress lines do: deployment.apps/web.
func (h ObjectHealth) Ref() string {
	kind := strings.ToLower(h.Entry.Kind)
	if h.Entry.Group != "" {
		kind += "." + h.Entry.Group
	}
	return kind + "/" + h.Entry.Name
}

// String is a progress line: "deployment.apps/web: Current", with the
// reason added when the object is not Current.
func (h ObjectHealth) String() string {
	s := h.Ref() + ": " + string(h.Status)
	if h.Status != Current && h.Reason != "" {
		s += " (" + h.Reason + ")"
	}
	return s
}

// Of judges one discovered object.
func Of(f discover.Found) ObjectHealth {
	h := ObjectHealth{Entry: f.Entry}
	switch {
	case f.Missing || f.Object == nil:
		h.Status, h.Reason = Missing, "not found on the cluster"
	default:
		h.Status, h.Reason = Compute(f.Object)
		h.Since = Since(f.Object)
	}
	return h
}

// Check judges discovered objects, in order.
func Check(found []discover.Found) []ObjectHealth {
	out := make([]ObjectHealth, len(found))
	for i, f := range found {
		out[i] = Of(f)
	}
	return out
}

// Compute judges a live object.
func Compute(u *unstructured.Unstructured) (Status, string) {
	// kstatus checks this too; checking first keeps Terminating certain
	// even for objects whose status kstatus cannot parse.
	if u.GetDeletionTimestamp() != nil {
		return Terminating, "deletion in progress"
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		// A malformed status is not a verdict: keep waiting rather than
		// fail a rollout on it.
		return InProgress, "status cannot be read: " + err.Error()
	}
	switch res.Status {
	case kstatus.CurrentStatus:
		return Current, res.Message
	case kstatus.FailedStatus:
		return Failed, res.Message
	case kstatus.TerminatingStatus:
		return Terminating, res.Message
	case kstatus.NotFoundStatus:
		return Missing, res.Message
	default: // InProgress, Unknown
		return InProgress, res.Message
	}
}

// Healthy reports whether every object is Current.
func Healthy(hs []ObjectHealth) bool {
	for _, h := range hs {
		if h.Status != Current {
			return false
		}
	}
	return true
}
