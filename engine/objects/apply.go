// Apply: server-side apply of one object, its dry run, taking over fields
// another manager owns, and re-creating on an immutable field.

package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Apply server-side applies obj. An existing object is first applied in
// dry-run and compared with the live object; the write is skipped
// (Unchanged, resourceVersion untouched) only when nothing would change
// and opm already owns every field it declares. An object another tool
// wrote is taken over (ownership.go) before the write, so a field the
// release later stops declaring is removed. live, when known is true, is
// the object as just read (nil: absent) and saves a GET.
func (c *Client) Apply(ctx context.Context, r manifest.Resource, live *unstructured.Unstructured, known bool) Result {
	obj := manifest.NormalizeSecret(r.Object)
	res := Result{Change: manifest.ChangeOf(r.ID(), obj.GroupVersionKind().Version, r.Component, "")}
	fail := func(err error) Result {
		res.Action, res.Err = manifest.Failed, err
		return res
	}
	ri, _, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return fail(fmt.Errorf("apply %s: %w", res.ID(), err))
	}
	if !known {
		live, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			live, err = nil, nil
		}
		if err != nil {
			return fail(fmt.Errorf("get %s: %w", res.ID(), err))
		}
	}
	if live != nil && live.GetDeletionTimestamp() != nil {
		return fail(&TerminatingError{ID: res.ID()})
	}

	if live == nil {
		out, err := c.apply(ctx, ri, obj, c.opts.DryRun, true)
		if err != nil {
			return fail(fmt.Errorf("apply %s: %w", res.ID(), err))
		}
		res.Action = manifest.Created
		res.setWritten(c.writtenVersion(out), out)
		return res
	}

	dry, force, err := c.dryRun(ctx, ri, res.ID(), obj)
	if fields, ok := immutableFields(err); ok {
		return c.recreate(ctx, ri, r, live, &ImmutableError{ID: res.ID(), Fields: fields, Err: err}, res)
	}
	if err != nil {
		return fail(err)
	}
	res.Forced = force.conflicts
	own, err := c.ownership(live, dry)
	if err != nil {
		return fail(fmt.Errorf("apply %s: %w", res.ID(), err))
	}
	if own.none() && sameObject(live, dry) {
		res.Action = manifest.Unchanged
		res.setWritten(live.GetResourceVersion(), live)
		return res
	}
	res.Reason = own.reason(c.opts.DryRun)
	if !c.opts.DryRun {
		if own.takeOver != nil {
			if live, err = c.takeOver(ctx, ri, live, own.takeOver); err != nil {
				return fail(fmt.Errorf("apply %s: %w", res.ID(), err))
			}
		}
		out, err := c.apply(ctx, ri, obj, false, force.needed)
		res.setWritten(c.writtenVersion(out), out)
		if fields, ok := immutableFields(err); ok {
			return c.recreate(ctx, ri, r, live, &ImmutableError{ID: res.ID(), Fields: fields, Err: err}, res)
		}
		if cs, ok := conflicts(err); ok {
			return fail(&ConflictError{ID: res.ID(), Conflicts: cs, Err: err})
		}
		if err != nil {
			return fail(fmt.Errorf("apply %s: %w", res.ID(), err))
		}
	}
	res.Action = manifest.Configured
	return res
}

// dryRun applies obj in dry-run without forcing ownership. A conflict with
// managers of the take-over set only is expected (their fields become
// opm's) and the dry run is repeated with force; one with any other
// manager is a *ConflictError unless ForceConflicts.
func (c *Client) dryRun(ctx context.Context, ri dynamic.ResourceInterface, id manifest.ID, obj *unstructured.Unstructured) (*unstructured.Unstructured, forcing, error) {
	dry, err := c.apply(ctx, ri, obj, true, false)
	cs, ok := conflicts(err)
	if !ok {
		if err != nil && !isImmutable(err) {
			err = fmt.Errorf("apply %s (server dry run): %w", id, err)
		}
		return dry, forcing{}, err
	}
	var outside []Conflict
	for _, cf := range cs {
		if cf.Manager != c.opts.FieldManager && !managerMatch(c.opts.TakeOver, cf.Manager) {
			outside = append(outside, cf)
		}
	}
	if len(outside) > 0 && !c.opts.ForceConflicts {
		return nil, forcing{}, &ConflictError{ID: id, Conflicts: outside, Err: err}
	}
	dry, err = c.apply(ctx, ri, obj, true, true)
	if err != nil && !isImmutable(err) {
		err = fmt.Errorf("apply %s (server dry run): %w", id, err)
	}
	return dry, forcing{needed: true, conflicts: outside}, err
}

// ownershipChange is what an apply changes about who owns live's fields.
type ownershipChange struct {
	takeOver *takeOver
	fields   fieldOwnership
	// gained are the fields opm's apply entry takes besides a take-over
	// (fields it newly declares that others own with the same value);
	// dropped those it no longer declares (removed from the object unless
	// another manager owns them too). changed is set when the entry
	// changes at all: also when it only declares fields new to the object.
	gained, dropped int
	changed         bool
}

func (o ownershipChange) none() bool { return o.takeOver == nil && !o.changed }

func (o ownershipChange) reason(dryRun bool) string {
	if o.takeOver != nil {
		return o.takeOver.reason(dryRun, o.fields.before)
	}
	if !o.changed {
		return ""
	}
	take, drop := "took", "dropped"
	if dryRun {
		take, drop = "would take", "would drop"
	}
	var parts []string
	if o.gained > 0 {
		parts = append(parts, fmt.Sprintf("%s ownership of %d field(s)", take, o.gained))
	}
	if o.dropped > 0 {
		parts = append(parts, fmt.Sprintf("%s %d field(s) it no longer declares", drop, o.dropped))
	}
	return strings.Join(parts, ", and ")
}

// ownership compares live with the dry run: the take-over it needs, and
// whether opm's apply entry would change otherwise.
func (c *Client) ownership(live, dry *unstructured.Unstructured) (ownershipChange, error) {
	to, err := planTakeOver(live, c.opts.FieldManager, c.opts.TakeOver)
	if err != nil {
		return ownershipChange{}, err
	}
	f, err := ownershipOf(live, dry, c.opts.FieldManager, to)
	if err != nil {
		return ownershipChange{}, err
	}
	o := ownershipChange{takeOver: to, fields: f}
	if to == nil && !f.before.Equals(f.after) {
		o.changed = true
		// Of the fields opm newly declares, those another manager owns
		// now are taken; the others are new to the object, which the
		// diff shows.
		others := &fieldpath.Set{}
		for _, m := range f.others {
			others = others.Union(m.fields)
		}
		o.gained = f.after.Difference(f.before).Intersection(others).Leaves().Size()
		o.dropped = f.before.Difference(f.after).Leaves().Size()
	}
	return o, nil
}

// takeOver moves the take-over managers' fields to opm (one JSON patch of
// managedFields, conditional on the resourceVersion it was computed from)
// and returns the patched object. Controllers write objects all the time
// (a Deployment's revision annotation and status right after it changed):
// on a conflict the object is read again and the take-over computed anew,
// as client-go's retry.RetryOnConflict does.
func (c *Client) takeOver(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, t *takeOver) (*unstructured.Unstructured, error) {
	var out *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if t == nil {
			return nil // the fresh object needs no take-over any more
		}
		patch, err := t.patch(live)
		if err != nil {
			return err
		}
		out, err = ri.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: c.opts.FieldManager})
		if !apierrors.IsConflict(err) {
			return err
		}
		if live, err = ri.Get(ctx, live.GetName(), metav1.GetOptions{}); err != nil {
			return err
		}
		out = live
		t, err = planTakeOver(live, c.opts.FieldManager, c.opts.TakeOver)
		if err != nil {
			return err
		}
		return apierrors.NewConflict(schema.GroupResource{}, live.GetName(), errors.New("the object changed while taking ownership of its fields"))
	})
	if err != nil {
		return nil, fmt.Errorf("taking ownership of its fields: %w", err)
	}
	return out, nil
}

func (c *Client) apply(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, dryRun, force bool) (*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: c.opts.FieldManager, Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Apply(ctx, obj.GetName(), obj, opts)
}

// recreate handles an immutable-field change: without Force it fails with
// the fields named; with Force it deletes the live object, waits until it
// is gone and creates it again (in a dry run it only reports that).
func (c *Client) recreate(ctx context.Context, ri dynamic.ResourceInterface, r manifest.Resource, live *unstructured.Unstructured, ie *ImmutableError, res Result) Result {
	if g, ok := recreateGuard(res.ID()); c.opts.Force && ok && !(manifest.Unguarded{PVCs: c.opts.RecreatePVCs, CRDs: c.opts.RecreateCRDs}).Allows(g) {
		res.Action = manifest.Failed
		res.Err = ie // its message names --force and the guard's flag
		return res
	}
	if !c.opts.Force {
		res.Action, res.Err = manifest.Failed, ie
		return res
	}
	fields := "immutable fields"
	if len(ie.Fields) > 0 {
		fields = strings.Join(ie.Fields, ", ")
	}
	res.Reason = "immutable " + fields + " changed: deleted and re-created (--force)"
	if c.opts.DryRun {
		res.Action = manifest.Recreated
		return res
	}
	uid := live.GetUID()
	policy := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, r.Object.GetName(), metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		res.Action, res.Err = manifest.Failed, fmt.Errorf("recreate %s: delete: %w", res.ID(), err)
		return res
	}
	if err := c.waitGone(ctx, ri, r.Object.GetName(), uid); err != nil {
		res.Action, res.Err = manifest.Failed, fmt.Errorf("recreate %s: %w", res.ID(), err)
		return res
	}
	if _, err := c.apply(ctx, ri, manifest.NormalizeSecret(r.Object), false, true); err != nil {
		res.Action, res.Err = manifest.Failed, fmt.Errorf("recreate %s: create: %w", res.ID(), err)
		return res
	}
	res.Action = manifest.Recreated
	return res
}

// sameObject compares live and a dry-run result without the fields the
// server changes on every write.
func sameObject(live, dry *unstructured.Unstructured) bool {
	return equality.Semantic.DeepEqual(manifest.WithoutServerFields(live.Object), manifest.WithoutServerFields(dry.Object))
}

// setWritten records the object's state after this result: rv and, when
// rv is known, the object holding it.
func (res *Result) setWritten(rv string, obj *unstructured.Unstructured) {
	res.ResourceVersion = rv
	if rv != "" {
		res.Live = obj
	}
}

// writtenVersion is o's resourceVersion, or empty in a dry run (nothing
// was persisted) or without an object.
func (c *Client) writtenVersion(o *unstructured.Unstructured) string {
	if c.opts.DryRun || o == nil {
		return ""
	}
	return o.GetResourceVersion()
}
