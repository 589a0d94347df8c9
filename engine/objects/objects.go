// Package objects is opm's resource manager (what fluxcd/pkg/ssa's
// ResourceManager is to Flux): it carries out per-object verbs against the
// API server:
// resolve a kind to a resource, get, server-side apply (skipping objects
// that would not change), delete, and wait for CRDs to be Established or
// for an object to be gone. ApplyAll applies a release's objects in
// weight stages with bounded concurrency. It is the applier, named for
// what its verbs act on one at a time; the whole apply of a release
// (checks, inventory, prune) is engine/reconcile.
//
// Why not github.com/fluxcd/pkg/ssa, the closest Go peer? It is good code
// and shaped this package, but it works through a controller-runtime
// client and brings its own ChangeSet and inventory model (object
// metadata without the component), which would sit beside the RFC 004
// inventory rather than serve it. We need things it does not expose: a
// progress event per object as it happens, the weight stages of the
// reference order (not only "cluster definitions first"), our own worker
// count and client rate limits, dry-run and pre-apply checks that report
// in our result types, and errors that name kind/namespace/name in our
// fault classes. That is a few hundred lines on client-go's dynamic
// client and RESTMapper, so we own them.
//
// What we took from ssa: dry-run apply first and compare with the live
// object (managedFields, resourceVersion, generation, creationTimestamp,
// uid and status ignored), and skip the write when they are equal, so an
// unchanged re-apply moves no resourceVersion; stage CRDs and Namespaces,
// then wait until CRDs are Established before custom resources; and on an
// immutable-field error, with force, delete, wait until the object is
// gone, and create it again.
package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Defaults.
const (
	FieldManager       = "opm"
	DefaultConcurrency = 8
	DefaultWaitTimeout = 2 * time.Minute
	pollInterval       = 100 * time.Millisecond
)

// Options tune a Client.
type Options struct {
	// FieldManager is the server-side apply manager; FieldManager when empty.
	FieldManager string
	// Concurrency bounds parallel requests per stage; DefaultConcurrency when < 1.
	Concurrency int
	// DryRun sends every write with dryRun=All: nothing is persisted.
	DryRun bool
	// Force recreates objects whose immutable fields change.
	Force bool
	// RecreatePVCs lets Force recreate PersistentVolumeClaims too, which
	// deletes their data; without it they fail like any immutable change.
	RecreatePVCs bool
	// RecreateCRDs lets Force recreate CustomResourceDefinitions, which
	// deletes every custom resource of their kind.
	RecreateCRDs bool
	// WaitTimeout bounds waiting for CRDs and deletions; DefaultWaitTimeout when zero.
	WaitTimeout time.Duration
	// TakeOver are the field managers whose fields apply takes over
	// (ownership.go): exact names, or prefixes ending in "*";
	// DefaultTakeOver() when nil.
	TakeOver []string
	// ForceConflicts takes fields that managers outside TakeOver own with
	// other values; without it such an object fails with a *ConflictError.
	ForceConflicts bool
}

// Client runs the verbs against one cluster.
type Client struct {
	cluster *kube.Cluster
	opts    Options
}

// New returns a Client for cl.
func New(cl *kube.Cluster, opts Options) *Client {
	if opts.FieldManager == "" {
		opts.FieldManager = FieldManager
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	if opts.TakeOver == nil {
		opts.TakeOver = DefaultTakeOver()
	}
	return &Client{cluster: cl, opts: opts}
}

// Options returns the effective options.
func (c *Client) Options() Options { return c.opts }

// Result is the outcome for one object.
type Result struct {
	ID manifest.ID
	// Version is the API version used.
	Version   string
	Component string
	Action    manifest.Action
	// Reason explains skipped and failed objects and notes on others.
	Reason string
	// Err is set when Action is Failed.
	Err error
	// ResourceVersion is the object's resourceVersion after a real (not
	// dry-run) create or configure, or the live one when Unchanged (also in
	// a dry run: nothing was written, so the live version stands, and an
	// apply that reuses a planned Unchanged can record it); empty otherwise.
	ResourceVersion string
	// Live is the object as the server holds it with that resourceVersion
	// (what the apply returned, or the live object when Unchanged); nil
	// when ResourceVersion is empty.
	Live *unstructured.Unstructured
	// NotOurs is set when DeleteOwned kept an object that does not carry
	// the release's id.
	NotOurs bool
	// KeptBy is the annotation that made DeleteOwned keep the object
	// (manifest.KeptBy), or "".
	KeptBy string
	// Forced are the conflicting fields of other managers taken with
	// ForceConflicts.
	Forced []Conflict
}

// Mapping resolves a kind to its resource through the cluster's
// RESTMapper. A kind the cached discovery does not know (a CRD created a
// moment ago) resets the mapper and is tried once more. An empty version
// asks for the server's preferred one.
func (c *Client) Mapping(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	var versions []string
	if version != "" {
		versions = []string{version}
	}
	m, err := c.cluster.Mapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		c.cluster.Mapper.Reset()
		m, err = c.cluster.Mapper.RESTMapping(gk, versions...)
	}
	if err != nil {
		gv := schema.GroupVersion{Group: gk.Group, Version: version}
		if meta.IsNoMatchError(err) {
			return nil, fault.Wrap(fault.NotFound, fmt.Errorf("the cluster serves no kind %s in %s: install its CustomResourceDefinition or check apiVersion: %w", gk.Kind, gv, err))
		}
		return nil, fmt.Errorf("resolve kind %s in %s: %w", gk.Kind, gv, err)
	}
	return m, nil
}

// resource returns the dynamic client for an object of gvk in namespace.
func (c *Client) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	m, err := c.Mapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			return nil, nil, fault.Validationf("%s is namespaced but the object has no metadata.namespace", gvk.Kind)
		}
		return c.cluster.Dynamic.Resource(m.Resource).Namespace(namespace), m, nil
	}
	return c.cluster.Dynamic.Resource(m.Resource), m, nil
}

// Get returns the live object; a missing object is an apierrors NotFound.
func (c *Client) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	ri, _, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

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

// immutableMessages are the wordings of immutable-field refusals:
// most validators and CEL's `self == oldSelf` rules with the customary
// message ("field is immutable", "Value is immutable", "is immutable after
// creation" for a claim's spec), Service cluster IPs ("may not change once
// set"), a binding's roleRef ("cannot change roleRef") and a StorageClass's
// provisioner, parameters and reclaim policy ("updates to parameters are
// forbidden").
var immutableMessages = [...]string{"is immutable", "immutable field", "may not change once set", "cannot change roleref"}

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

// Apply server-side applies obj. An existing object is first applied in
// dry-run and compared with the live object; the write is skipped
// (Unchanged, resourceVersion untouched) only when nothing would change
// and opm already owns every field it declares. An object another tool
// wrote is taken over (ownership.go) before the write, so a field the
// release later stops declaring is removed. live, when known is true, is
// the object as just read (nil: absent) and saves a GET.
func (c *Client) Apply(ctx context.Context, r manifest.Resource, live *unstructured.Unstructured, known bool) Result {
	obj := manifest.NormalizeSecret(r.Object)
	res := Result{ID: r.ID(), Version: obj.GroupVersionKind().Version, Component: r.Component}
	fail := func(err error) Result {
		res.Action, res.Err = manifest.Failed, err
		return res
	}
	ri, _, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return fail(fmt.Errorf("apply %s: %w", res.ID, err))
	}
	if !known {
		live, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			live, err = nil, nil
		}
		if err != nil {
			return fail(fmt.Errorf("get %s: %w", res.ID, err))
		}
	}
	if live != nil && live.GetDeletionTimestamp() != nil {
		return fail(&TerminatingError{ID: res.ID})
	}

	if live == nil {
		out, err := c.apply(ctx, ri, obj, c.opts.DryRun, true)
		if err != nil {
			return fail(fmt.Errorf("apply %s: %w", res.ID, err))
		}
		res.Action = manifest.Created
		res.setWritten(c.writtenVersion(out), out)
		return res
	}

	dry, force, err := c.dryRun(ctx, ri, res.ID, obj)
	if fields, ok := immutableFields(err); ok {
		return c.recreate(ctx, ri, r, live, &ImmutableError{ID: res.ID, Fields: fields, Err: err}, res)
	}
	if err != nil {
		return fail(err)
	}
	res.Forced = force.conflicts
	own, err := c.ownership(live, dry)
	if err != nil {
		return fail(fmt.Errorf("apply %s: %w", res.ID, err))
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
				return fail(fmt.Errorf("apply %s: %w", res.ID, err))
			}
		}
		out, err := c.apply(ctx, ri, obj, false, force.needed)
		res.setWritten(c.writtenVersion(out), out)
		if fields, ok := immutableFields(err); ok {
			return c.recreate(ctx, ri, r, live, &ImmutableError{ID: res.ID, Fields: fields, Err: err}, res)
		}
		if cs, ok := conflicts(err); ok {
			return fail(&ConflictError{ID: res.ID, Conflicts: cs, Err: err})
		}
		if err != nil {
			return fail(fmt.Errorf("apply %s: %w", res.ID, err))
		}
	}
	res.Action = manifest.Configured
	return res
}

// forcing says whether an apply must force ownership, and which fields of
// managers outside the take-over set it takes (only with ForceConflicts).
type forcing struct {
	needed    bool
	conflicts []Conflict
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
	if g, ok := recreateGuard(res.ID); c.opts.Force && ok && !(manifest.Unguarded{PVCs: c.opts.RecreatePVCs, CRDs: c.opts.RecreateCRDs}).Allows(g) {
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
		res.Action, res.Err = manifest.Failed, fmt.Errorf("recreate %s: delete: %w", res.ID, err)
		return res
	}
	if err := c.waitGone(ctx, ri, r.Object.GetName(), uid); err != nil {
		res.Action, res.Err = manifest.Failed, fmt.Errorf("recreate %s: %w", res.ID, err)
		return res
	}
	if _, err := c.apply(ctx, ri, manifest.NormalizeSecret(r.Object), false, true); err != nil {
		res.Action, res.Err = manifest.Failed, fmt.Errorf("recreate %s: create: %w", res.ID, err)
		return res
	}
	res.Action = manifest.Recreated
	return res
}

// WaitGone waits until the object is gone, or replaced by one with
// another UID; with an empty uid, until no object of that name exists.
func (c *Client) WaitGone(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	ri, _, err := c.resource(gvk, namespace)
	if err != nil {
		return err
	}
	return c.waitGone(ctx, ri, name, uid)
}

func (c *Client) waitGone(ctx context.Context, ri dynamic.ResourceInterface, name string, uid types.UID) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.WaitTimeout)
	defer cancel()
	for {
		o, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && uid != "" && o.GetUID() != uid) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("wait for %s to be deleted: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still exists after %s (finalizers %v): %w", name, c.opts.WaitTimeout, finalizers(o), ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

func finalizers(o *unstructured.Unstructured) []string {
	if o == nil {
		return nil
	}
	return o.GetFinalizers()
}

// sameObject compares live and a dry-run result without the fields the
// server changes on every write.
func sameObject(live, dry *unstructured.Unstructured) bool {
	return equality.Semantic.DeepEqual(manifest.WithoutServerFields(live.Object), manifest.WithoutServerFields(dry.Object))
}

// NotOursReason starts the reason of an object DeleteOwned kept.
const NotOursReason = "recorded but not ours: kept"

// KeptReason is the reason of an object kept by its annotation a.
func KeptReason(a string) string {
	return fmt.Sprintf("kept: its %s annotation is %q (remove the annotation to let prune delete it)", a, manifest.ResourcePolicyKeep)
}

// DeleteOwned deletes an object with background propagation and does not
// wait for finalizers, resolving its kind to the server's preferred
// version (RFC 004 edge case 6; a missing object or a kind no longer
// served counts as deleted, Reason "already gone"), but only if the live object
// carries releaseID in its module-release.opmodel.dev/uuid label:
// otherwise it is Skipped with NotOurs set. An object annotated to be kept
// (manifest.KeptBy) is Skipped with KeptBy set. An inventory is just a Secret,
// and whoever can write one must not be able to make a pipeline's
// credentials delete objects that are not the release's. The delete is
// conditional on the UID that was checked.
func (c *Client) DeleteOwned(ctx context.Context, id manifest.ID, releaseID string) (Result, error) {
	ri, res, served, err := c.forDelete(id)
	if !served || err != nil {
		return res, err
	}
	live, err := ri.Get(ctx, id.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		res.Reason = "already gone"
		return res, nil
	}
	if err != nil {
		return c.failed(res, fmt.Errorf("delete %s: get: %w", id, err))
	}
	if got := live.GetLabels()[manifest.LabelReleaseUUID]; got != releaseID {
		res.Action, res.NotOurs = manifest.Skipped, true
		res.Reason = fmt.Sprintf("%s (its %s label is %q, not this release's %s)", NotOursReason, manifest.LabelReleaseUUID, got, releaseID)
		return res, nil
	}
	if a := manifest.KeptBy(live.GetAnnotations()); a != "" {
		res.Action, res.KeptBy = manifest.Skipped, a
		res.Reason = KeptReason(a)
		return res, nil
	}
	uid := live.GetUID()
	return c.deleteNow(ctx, ri, res, &metav1.Preconditions{UID: &uid})
}

// forDelete resolves id's kind to the server's preferred version. served
// is false (and res already "already gone") when the kind is no longer
// served.
func (c *Client) forDelete(id manifest.ID) (ri dynamic.ResourceInterface, res Result, served bool, err error) {
	res = Result{ID: id, Action: manifest.Deleted}
	m, err := c.Mapping(id.GroupKind(), "")
	if meta.IsNoMatchError(err) {
		res.Reason = "already gone (its kind is no longer served)"
		return nil, res, false, nil
	}
	if err != nil {
		res, err = c.failed(res, fmt.Errorf("delete %s: %w", id, err))
		return nil, res, false, err
	}
	res.Version = m.GroupVersionKind.Version
	ri = c.cluster.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.cluster.Dynamic.Resource(m.Resource).Namespace(id.Namespace)
	}
	return ri, res, true, nil
}

// deleteNow sends the delete (background propagation, the client's dry
// run, optional preconditions); a missing object is already gone.
func (c *Client) deleteNow(ctx context.Context, ri dynamic.ResourceInterface, res Result, pre *metav1.Preconditions) (Result, error) {
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: pre}
	if c.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err := ri.Delete(ctx, res.ID.Name, opts)
	if apierrors.IsNotFound(err) {
		res.Reason = "already gone"
		return res, nil
	}
	if err != nil {
		return c.failed(res, fmt.Errorf("delete %s: %w", res.ID, err))
	}
	return res, nil
}

func (c *Client) failed(res Result, err error) (Result, error) {
	res.Action, res.Err = manifest.Failed, err
	return res, err
}

// recreateGuard is the guard of a kind whose re-creation deletes more
// than the object: a PersistentVolumeClaim's data, a CRD's custom
// resources. (A Namespace has no immutable field to re-create it for.)
func recreateGuard(id manifest.ID) (manifest.Guard, bool) {
	g, ok := manifest.GuardOf(id.GroupKind())
	return g, ok && g.Kind != "Namespace"
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
