// The API server's refusals that opm names: an object being deleted, and
// a field no update may change (what --force re-creates on).

package objects

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/manifest"
)

// TerminatingError says an object is being deleted (it has a
// deletionTimestamp, finalizers pending): applying to it would "succeed"
// and then the object would vanish.
type TerminatingError struct{ ID manifest.ID }

func (e *TerminatingError) Error() string {
	return fmt.Sprintf("%s is being deleted (terminating); wait for its deletion to complete, then apply again", e.ID)
}

// ImmutableError says an apply would change immutable fields.
type ImmutableError struct {
	ID     manifest.ID
	Fields []string
	Err    error
}

func (e *ImmutableError) Error() string {
	fields := "a field"
	if len(e.Fields) > 0 {
		fields = strings.Join(e.Fields, ", ")
	}
	if g, ok := recreateGuard(e.ID); ok {
		// Re-creating a claim deletes its data, a CRD its custom
		// resources: --force alone never does.
		return fmt.Sprintf("%s: cannot change immutable %s; re-run with --force %s to delete and re-create it (deleting %s): %v", e.ID, fields, g.Flag, g.Loses, e.Err)
	}
	return fmt.Sprintf("%s: cannot change immutable %s; re-run with --force to delete and re-create it: %v", e.ID, fields, e.Err)
}

func (e *ImmutableError) Unwrap() error { return e.Err }

// immutableFields reports whether err is a 422 Invalid caused by changing
// a field the API server lets no update change, and which fields. These are
// the refusals fluxcd/pkg/ssa recreates on by their wording (its
// errors.IsImmutableError matches "is immutable" and "immutable field"),
// plus the built-in validators that word it otherwise; a refusal for any
// other reason (a bad quantity, a failed rule) is never one, so --force
// never deletes an object because its new value is wrong.
func immutableFields(err error) ([]string, bool) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Reason != metav1.StatusReasonInvalid {
		return nil, false
	}
	st := se.Status()
	var fields []string
	found := false
	if st.Details != nil {
		for _, cause := range st.Details.Causes {
			if immutableMessage(cause.Message) {
				found = true
				if cause.Field != "" {
					fields = append(fields, cause.Field)
				}
			}
		}
	}
	return fields, found || immutableMessage(st.Message)
}

func immutableMessage(msg string) bool {
	msg = strings.ToLower(msg)
	for _, m := range immutableMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	before, _, ok := strings.Cut(msg, " are forbidden")
	return ok && strings.Contains(before, "updates to ")
}

func isImmutable(err error) bool {
	_, ok := immutableFields(err)
	return ok
}

// recreateGuard is the guard of a kind whose re-creation deletes more
// than the object: a PersistentVolumeClaim's data, a CRD's custom
// resources. (A Namespace has no immutable field to re-create it for.)
func recreateGuard(id manifest.ID) (manifest.Guard, bool) {
	g, ok := manifest.GuardOf(id.GroupKind())
	return g, ok && g.Kind != "Namespace"
}
