package objects

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Field ownership. Server-side apply removes a field only when the applying
// manager owned it and stops declaring it. Objects first written by someone
// else — `kubectl apply` (client-side), `kubectl create`, `kubectl edit`,
// Helm's Update requests — keep their fields owned by those managers, so an
// apply that merely equals them would leave every field opm later stops
// declaring on the cluster forever. Apply therefore takes the fields of the
// managers in a take-over set (TakeOver) into opm's own apply entry before
// it writes, as fluxcd/pkg/ssa's ApplyCleanupOptions.FieldManagers do, with
// client-go's csaupgrade doing the merge; a field owned by any other manager
// with another value is a conflict, refused unless ForceConflicts.

// DefaultTakeOver is the take-over set when none is given: every kubectl
// command (client-side apply, create, edit, patch, label, scale, and
// `kubectl apply --server-side`), the manager the API server names objects
// created before managed fields existed, and Helm 3.
func DefaultTakeOver() []string {
	return []string{"kubectl", "kubectl-*", "before-first-apply", "helm"}
}

// managerMatch reports whether name is in patterns: an exact name, or a
// prefix ending in "*".
func managerMatch(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}

// takeOver is what taking ownership of an object means for its managed
// fields: the managers whose fields become opm's, the merged entries, and
// how many fields opm does not own yet.
type takeOver struct {
	// from are the managers taken over, sorted.
	from []string
	// managedFields are the object's entries after the take-over.
	managedFields []metav1.ManagedFieldsEntry
	// taken are the fields moved to opm's apply entry.
	taken *fieldpath.Set
	// lastApplied is set when the object carries kubectl's annotation.
	lastApplied bool
}

// planTakeOver computes the take-over of live's fields for manager self:
// nil when no manager of patterns owns a field of the main resource and
// there is no last-applied annotation. opm's own Update entries (an object
// opm created with a plain create) are always taken.
func planTakeOver(live *unstructured.Unstructured, self string, patterns []string) (*takeOver, error) {
	names := sets.New[string]()
	taken := &fieldpath.Set{}
	for _, e := range live.GetManagedFields() {
		if e.Subresource != "" || (e.Manager == self && e.Operation == metav1.ManagedFieldsOperationApply) {
			continue
		}
		if e.Manager != self && !managerMatch(patterns, e.Manager) {
			continue
		}
		names.Insert(e.Manager)
		s, err := fieldSet(e)
		if err != nil {
			return nil, err
		}
		taken = taken.Union(s)
	}
	_, lastApplied := live.GetAnnotations()[manifest.LastAppliedAnnotation]
	if names.Len() == 0 && !lastApplied {
		return nil, nil
	}
	// csaupgrade merges Update entries only; a take-over manager's Apply
	// entry (`kubectl apply --server-side`) is merged the same way by
	// presenting it as an Update in the copy it works on.
	c := live.DeepCopy()
	mf := c.GetManagedFields()
	for i, e := range mf {
		if e.Subresource == "" && e.Manager != self && names.Has(e.Manager) {
			mf[i].Operation = metav1.ManagedFieldsOperationUpdate
		}
	}
	c.SetManagedFields(mf)
	if err := csaupgrade.UpgradeManagedFields(c, names, self); err != nil {
		return nil, fmt.Errorf("taking over the fields of %s: %w", strings.Join(sets.List(names), ", "), err)
	}
	return &takeOver{from: sets.List(names), managedFields: c.GetManagedFields(), taken: taken, lastApplied: lastApplied}, nil
}

// patch is the JSON patch that carries out t on live: the merged managed
// fields, kubectl's annotation removed, and live's resourceVersion, so a
// write in between makes the patch fail with a conflict instead of
// discarding that writer's ownership (csaupgrade's UpgradeManagedFieldsPatch
// does the same).
func (t *takeOver) patch(live *unstructured.Unstructured) ([]byte, error) {
	mf := t.managedFields
	if len(mf) == 0 {
		// An empty list would leave the field as is; one empty entry clears it.
		mf = []metav1.ManagedFieldsEntry{{}}
	}
	ops := []map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": mf},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
	}
	if t.lastApplied {
		ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/annotations/" + strings.ReplaceAll(manifest.LastAppliedAnnotation, "/", "~1")})
	}
	return json.Marshal(ops)
}

// reason says what the take-over does, for the object's progress line.
func (t *takeOver) reason(dryRun bool, owned *fieldpath.Set) string {
	n := 0
	if t.taken != nil {
		n = t.taken.Difference(owned).Leaves().Size()
	}
	verb := "took"
	if dryRun {
		verb = "would take"
	}
	from := strings.Join(t.from, ", ")
	if from == "" {
		return fmt.Sprintf("adopted: %s over from kubectl's last-applied annotation (removed)", verb)
	}
	return fmt.Sprintf("adopted: %s ownership of %d field(s) from %s", verb, n, from)
}

// fieldSet decodes one managed-fields entry.
func fieldSet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	s := &fieldpath.Set{}
	if e.FieldsV1 == nil {
		return s, nil
	}
	if err := s.FromJSON(strings.NewReader(string(e.FieldsV1.Raw))); err != nil {
		return nil, fmt.Errorf("reading the managed fields of %q: %w", e.Manager, err)
	}
	return s, nil
}

// appliedBy is the set of main-resource fields manager owns through apply.
func appliedBy(obj *unstructured.Unstructured, manager string) (*fieldpath.Set, error) {
	out := &fieldpath.Set{}
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			s, err := fieldSet(e)
			if err != nil {
				return nil, err
			}
			out = out.Union(s)
		}
	}
	return out, nil
}

// Conflict is one field another manager owns with another value.
type Conflict struct {
	Field, Manager string
}

// ConflictError says an apply would change fields other managers own,
// managers outside the take-over set: taking them needs ForceConflicts.
type ConflictError struct {
	ID        manifest.ID
	Conflicts []Conflict
	Err       error
}

func (e *ConflictError) Error() string {
	parts := make([]string, 0, len(e.Conflicts))
	for _, c := range e.Conflicts {
		parts = append(parts, fmt.Sprintf("%s (owned by %q)", c.Field, c.Manager))
	}
	return fmt.Sprintf("%s: fields owned by another manager would change: %s; change the release to match, stop the other manager, "+
		"add it to the take-over set (--take-over), or re-run with --force-conflicts to take them", e.ID, strings.Join(parts, ", "))
}

func (e *ConflictError) Unwrap() error { return e.Err }

// conflicts reads the fields and managers of a server-side apply conflict
// (409 with FieldManagerConflict causes); ok is false for any other error.
func conflicts(err error) ([]Conflict, bool) {
	if !apierrors.IsConflict(err) {
		return nil, false
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return nil, false
	}
	var out []Conflict
	for _, c := range se.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		// The message reads: conflict with "manager" using v1 (or with
		// "manager" with subresource "scale" using v1).
		manager := c.Message
		if _, rest, ok := strings.Cut(c.Message, `"`); ok {
			manager, _, _ = strings.Cut(rest, `"`)
		}
		out = append(out, Conflict{Field: c.Field, Manager: manager})
	}
	return out, len(out) > 0
}

// fieldOwnership is who owns an object's fields around one apply: opm's
// apply entry in the live object (before) and in the dry run (after), and
// every other manager's entry in the dry run but a take-over's managers
// (whose fields become opm's). Parsed once per object.
type fieldOwnership struct {
	before, after *fieldpath.Set
	others        []managerFields
}

type managerFields struct {
	manager string
	fields  *fieldpath.Set
}

func ownershipOf(live, dry *unstructured.Unstructured, manager string, t *takeOver) (fieldOwnership, error) {
	var f fieldOwnership
	var err error
	if f.before, err = appliedBy(live, manager); err != nil {
		return f, err
	}
	if f.after, err = appliedBy(dry, manager); err != nil {
		return f, err
	}
	for _, e := range dry.GetManagedFields() {
		if e.Manager == manager || (t != nil && slices.Contains(t.from, e.Manager)) {
			continue
		}
		s, err := fieldSet(e)
		if err != nil {
			return f, err
		}
		f.others = append(f.others, managerFields{manager: e.Manager, fields: s})
	}
	return f, nil
}

// removed is what an apply after the take-over t removes from the object:
// the fields opm owns then (what it owned, plus what it takes) that it no
// longer declares, minus everything another manager keeps owning, and
// minus the parents of any field that stays.
func (f fieldOwnership) removed(t *takeOver) *fieldpath.Set {
	owned := f.before
	if t != nil {
		owned = owned.Union(t.taken)
	}
	// A field any other manager owns stays, through a subresource too (an
	// autoscaler owns replicas through scale): the server removes a field
	// only when no manager owns it any more.
	kept := f.after
	for _, o := range f.others {
		kept = kept.Union(o.fields)
	}
	out := &fieldpath.Set{}
	owned.Difference(kept).Iterate(func(p fieldpath.Path) {
		if p.String() == "" || hasDescendantIn(kept, p) {
			return
		}
		out.Insert(p)
	})
	return out
}

// keptByOthers names the fields opm owns now but stops declaring that the
// apply cannot remove because another manager owns them too, e.g.
// `.spec.replicas (kube-controller-manager)`; "" when none.
func (f fieldOwnership) keptByOthers() string {
	dropped := f.before.Difference(f.after).Leaves()
	if dropped.Empty() {
		return ""
	}
	var kept []string
	for _, o := range f.others {
		dropped.Intersection(o.fields).Iterate(func(p fieldpath.Path) {
			kept = append(kept, fmt.Sprintf("%s (%s)", p, o.manager))
		})
	}
	if len(kept) == 0 {
		return ""
	}
	slices.Sort(kept)
	return "no longer declared but kept, another manager owns it: " + strings.Join(slices.Compact(kept), ", ")
}

// hasDescendantIn reports whether s holds a path below p.
func hasDescendantIn(s *fieldpath.Set, p fieldpath.Path) bool {
	found := false
	s.Iterate(func(q fieldpath.Path) {
		if !found && len(q) > len(p) && q[:len(p)].Equals(p) {
			found = true
		}
	})
	return found
}

// removePaths deletes every path of set from obj: what apply would remove.
// A path that does not resolve (a list element already gone) is ignored.
func removePaths(obj map[string]any, set *fieldpath.Set) {
	set.Iterate(func(p fieldpath.Path) { removePath(obj, p) })
}

func removePath(v any, p fieldpath.Path) any {
	if len(p) == 0 {
		return nil
	}
	pe := p[0]
	switch {
	case pe.FieldName != nil:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		if len(p) == 1 {
			delete(m, *pe.FieldName)
			return m
		}
		if child, ok := m[*pe.FieldName]; ok {
			m[*pe.FieldName] = removePath(child, p[1:])
		}
		return m
	default:
		l, ok := v.([]any)
		if !ok {
			return v
		}
		for i, item := range l {
			if !listElementIs(item, i, pe) {
				continue
			}
			if len(p) == 1 {
				return slices.Delete(slices.Clone(l), i, i+1)
			}
			l[i] = removePath(item, p[1:])
			return l
		}
		return l
	}
}

// listElementIs reports whether item (at index i) is the list element pe
// names: by its key fields, its value (a set), or its index.
func listElementIs(item any, i int, pe fieldpath.PathElement) bool {
	switch {
	case pe.Index != nil:
		return *pe.Index == i
	case pe.Key != nil:
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		for _, f := range *pe.Key {
			got, err := json.Marshal(m[f.Name])
			if err != nil {
				return false
			}
			want, err := json.Marshal(f.Value.Unstructured())
			if err != nil || string(got) != string(want) {
				return false
			}
		}
		return true
	case pe.Value != nil:
		got, err := json.Marshal(item)
		if err != nil {
			return false
		}
		want, err := json.Marshal((*pe.Value).Unstructured())
		return err == nil && string(got) == string(want)
	}
	return false
}
