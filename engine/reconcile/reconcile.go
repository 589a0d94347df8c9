// Package reconcile runs the release inventory RFC's apply flow (004,
// steps 4–8) for one rendered release on one cluster, and the prune-only
// flow behind `opm prune`:
//
//  4. read the previous inventory Secret;
//  5. stale set = previous − current on (group, kind, namespace, name,
//     component), minus component renames; check that no rendered object
//     the previous change does not record (all of them, on a first apply)
//     is terminating or exists without this release's labels (unless
//     adopting) — whatever NoPrune says;
//  6. server-side apply in weight stages;
//  7. on any apply error stop: nothing is pruned and the inventory is not
//     written; otherwise prune the stale set in reverse weight order,
//     skipping Namespaces and PersistentVolumeClaims unless asked, and
//     treating a forbidden delete as a warning;
//  8. write the inventory with a full PUT on the resourceVersion read in
//     step 4, recording the rendered objects plus every stale object that
//     was not deleted, so a later run tries again.
//
// A dry run does all of it with server-side dry-run requests and writes
// nothing.
//
// With Options.Lock set, steps 4–8 (and delete) run under the release's
// lock (engine/lock), a Lease named after the inventory Secret, so two
// runs of one release never interleave; a dry run takes no lock.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/engine/workers"
)

// Options tune Apply and Prune.
type Options struct {
	// DryRun sends every write as a server-side dry run and writes no inventory.
	DryRun bool
	// NoPrune applies without deleting the stale set (it stays recorded).
	NoPrune bool
	// PruneNamespaces allows deleting stale Namespaces (and all they hold).
	PruneNamespaces bool
	// PrunePVCs allows deleting stale PersistentVolumeClaims (their data).
	PrunePVCs bool
	// PruneCRDs allows deleting stale CustomResourceDefinitions (every
	// custom resource of their kind, cluster-wide).
	PruneCRDs bool
	// Force allows an empty render to prune a whole release, and recreates
	// objects whose immutable fields change.
	Force bool
	// Adopt lets apply take over existing objects it has not recorded and
	// that do not carry this release's labels.
	Adopt bool
	// TakeOver are the field managers whose fields apply takes over
	// (objects.Options.TakeOver); objects.DefaultTakeOver() when nil.
	TakeOver []string
	// ForceConflicts takes fields other managers own with other values;
	// the change records whose.
	ForceConflicts bool
	// PruneGhosts also deletes ghosts: objects that carry this release's
	// id but are in neither the inventory nor the render (found by a
	// label scan), with the stale set's protections and order.
	PruneGhosts bool
	// MaxHistory caps the changes kept; inventory.DefaultMaxHistory when < 1.
	MaxHistory int
	// Concurrency bounds parallel requests; objects.DefaultConcurrency when < 1.
	Concurrency int
	// WaitTimeout bounds waits for CRDs and re-creation; objects.DefaultWaitTimeout when zero.
	WaitTimeout time.Duration
	// Progress receives one event per object applied or pruned, never concurrently.
	Progress func(Event)
	// Now stamps the inventory; time.Now when nil.
	Now func() time.Time
	// Lock, when set, is how the release's lock is taken (Labels and
	// Unlock are filled in here); nil runs unlocked. Ignored in a dry run.
	Lock *lock.Options
	// Source is recorded with the change (where it came from); nil when unknown.
	Source *inventory.Source
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// run is the state of one Apply or Prune.
type run struct {
	cl     *kube.Cluster
	rel    *render.Release
	opts   Options
	client *objects.Client
	res    *Result
	mu     sync.Mutex
	// rendered marks the rendered objects an apply event reported, done
	// counts them (under mu): the "N of M" of progress events.
	rendered map[string]bool
	done     int
	// lk is the release's lock while held.
	lk *lock.Lock
	// createdNS is the release's rendered Namespace when ensureNamespace
	// created it: the staged apply finds it unchanged, but this apply
	// created it.
	createdNS manifest.ID
	// forcedFrom are the managers whose conflicting fields the apply took
	// (Options.ForceConflicts), sorted.
	forcedFrom []string
}

func newRun(cl *kube.Cluster, rel *render.Release, opts Options) *run {
	return &run{
		cl: cl, rel: rel, opts: opts,
		client: objects.New(cl, objects.Options{
			Concurrency: opts.Concurrency, DryRun: opts.DryRun, Force: opts.Force, RecreatePVCs: opts.PrunePVCs, RecreateCRDs: opts.PruneCRDs, WaitTimeout: opts.WaitTimeout,
			TakeOver: opts.TakeOver, ForceConflicts: opts.ForceConflicts,
		}),
		res: &Result{
			Release: rel.Name, Namespace: rel.Namespace, ReleaseID: rel.ReleaseID,
			Cluster: cl.String(), Server: cl.Server, Context: cl.Context,
			ManifestDigest: rel.ManifestDigest, ChangeID: rel.ChangeID, DryRun: opts.DryRun,
			Changes:   NoChanges(),
			Inventory: InventoryRef{Name: inventory.SecretName(rel.Name, rel.ReleaseID), Namespace: rel.Namespace, ChangeIDs: []string{}},
		},
	}
}

func (r *run) emit(phase Phase, o manifest.Change) {
	if r.opts.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := Event{Release: r.rel.Name, Namespace: r.rel.Namespace, Phase: phase, Object: o, DryRun: r.opts.DryRun}
	if phase == PhaseApply {
		if r.rendered == nil {
			r.rendered = map[string]bool{}
			for _, res := range r.rel.Resources {
				id := res.ID()
				r.rendered[progressKey(id.Group, id.Kind, id.Namespace, id.Name)] = false
			}
		}
		// Each rendered object once: the release's namespace created
		// aside is not one, and a namespace reported twice counts once.
		if k := progressKey(o.Group, o.Kind, o.Namespace, o.Name); !r.rendered[k] {
			if _, ok := r.rendered[k]; ok {
				r.rendered[k] = true
				r.done++
			}
		}
		e.Done, e.Total = r.done, len(r.rendered)
	}
	r.opts.Progress(e)
}

func progressKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

func (r *run) invRelease() inventory.Release {
	return inventory.Release{Name: r.rel.Name, Namespace: r.rel.Namespace, ReleaseID: r.rel.ReleaseID, Environment: r.rel.Environment}
}

// where names the release and cluster in errors.
func (r *run) where() string {
	return fmt.Sprintf("release %s (namespace %s) on %s", r.rel.Name, r.rel.Namespace, r.cl)
}

// readInventory is step 4 and 5a/5b.
func (r *run) readInventory(ctx context.Context) (*inventory.Inventory, []inventory.Entry, []inventory.Entry, error) {
	prev, err := inventory.Read(ctx, r.cl.Clientset, r.invRelease())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", r.where(), err)
	}
	var prevEntries []inventory.Entry
	if prev != nil {
		var outside []inventory.Entry
		prevEntries, outside = prev.LatestWithin(r.rel.Reach.Recorded())
		if w := inventory.OutsideWarning(prev.Name(), outside); w != "" {
			r.res.Warnings = append(r.res.Warnings, w)
		}
		r.res.Inventory.Previous, _, _ = prev.Latest()
		r.res.Inventory.Name = prev.Name()
		r.res.Inventory.ChangeIDs = slices.Clone(prev.Index)
	}
	stale := inventory.Stale(prevEntries, inventory.Entries(r.rel.Resources))
	for _, e := range stale {
		r.res.Stale = append(r.res.Stale, objectOfEntry(e))
	}
	r.res.Counts.Stale = len(stale)
	return prev, prevEntries, stale, nil
}

// refuseEmpty is scenario P: an empty render would prune everything.
func (r *run) refuseEmpty(prevEntries []inventory.Entry) error {
	if len(r.rel.Resources) > 0 || len(prevEntries) == 0 || r.opts.Force {
		return nil
	}
	return fault.Validationf("%s rendered no objects, but its inventory records %d: continuing would prune all of them; "+
		"check the values and environment, or pass --force if removing everything is intended", r.where(), len(prevEntries))
}

// Apply runs the apply flow for rel on cl. The Result is returned even
// with an error, describing what was done before the failure.
func Apply(ctx context.Context, cl *kube.Cluster, rel *render.Release, opts Options) (*Result, error) {
	start := time.Now()
	r := newRun(cl, rel, opts)
	defer func() { r.res.Duration = time.Since(start) }()

	// The lock lives in the release namespace, so that comes first.
	var newNamespaces []string
	if created, err := r.ensureNamespace(ctx); err != nil {
		return r.res, err
	} else if created {
		newNamespaces = []string{rel.Namespace}
	}
	if err := r.acquire(ctx); err != nil {
		return r.res, err
	}
	defer r.release(ctx)

	prev, prevEntries, stale, err := r.readInventory(ctx)
	if err != nil {
		return r.res, err
	}
	if err := r.refuseEmpty(prevEntries); err != nil {
		return r.res, err
	}
	trimmed, err := r.checkSize(prev, stale)
	if err != nil {
		return r.res, err
	}

	// 5c, whatever NoPrune says. The RFC checks on a first apply; we check
	// every object the previous change does not record, which on a first
	// apply is all of them, so an object added later cannot silently adopt
	// someone else's either (the RFC's edge case 8).
	r.res.FirstApply = len(prevEntries) == 0
	recorded := make(map[manifest.ID]bool, len(prevEntries))
	for _, e := range prevEntries {
		recorded[e.ID] = true
	}
	var unrecorded []manifest.Resource
	for _, res := range rel.Resources {
		if !recorded[res.ID()] {
			unrecorded = append(unrecorded, res)
		}
	}
	live, err := r.client.GetAll(ctx, unrecorded)
	if err != nil {
		return r.res, fmt.Errorf("%s: pre-apply check: %w", r.where(), err)
	}
	if err := r.preApplyCheck(unrecorded, live); err != nil {
		return r.res, err
	}

	// 6a: ask the server about every object of every stage first, so an
	// object it would refuse (an immutable field, a failed validation)
	// stops the apply before any stage changed the cluster.
	// What provably did not change since the last apply is set apart first:
	// it needs neither the plan's dry run nor the apply.
	unchanged, toApply, err := r.splitUnchanged(ctx, prevEntries, live)
	if err != nil {
		return r.res, err
	}
	var planned map[manifest.ID]objects.Result
	if !opts.DryRun {
		if planned, err = r.plan(ctx, toApply, unchanged, live, newNamespaces); err != nil {
			return r.res, err
		}
	}

	// 6: apply the rest. Objects set apart as unchanged are reported in
	// render order among the applied ones.
	emitted := make(map[manifest.ID]bool, len(unchanged))
	results, applyErr := r.client.ApplyAll(ctx, toApply, objects.ApplyOptions{
		Live: live,
		Progress: func(res objects.Result) {
			r.emitUnchangedBefore(unchanged, emitted, res.ID())
			r.emit(PhaseApply, objectOf(r.created(res)))
		},
		NewNamespaces: newNamespaces,
		Planned:       planned,
	})
	results = r.mergeUnchanged(results, unchanged, emitted, applyErr != nil)
	for i := range results {
		results[i] = r.created(results[i])
		r.res.Applied = append(r.res.Applied, objectOf(results[i]))
		r.res.Counts.add(results[i].Action)
		r.noteForced(results[i])
	}
	if applyErr != nil {
		return r.res, fmt.Errorf("%s: applying failed, so nothing was pruned and the inventory was not written: %w", r.where(), applyErr)
	}

	if err := r.stillLocked(); err != nil {
		return r.res, fmt.Errorf("%s: applied, but nothing was pruned and the inventory was not written: %w", r.where(), err)
	}

	// 7: prune.
	ghosts, err := r.ghosts(ctx, prevEntries)
	if err != nil {
		return r.res, fmt.Errorf("%s: applied, but nothing was pruned and the inventory was not written: %w", r.where(), err)
	}
	kept, _, pruneErr := r.prune(ctx, withGhosts(stale, ghosts))
	kept = withoutGhosts(kept, ghosts)

	// 8: record what was rendered plus every stale object still there.
	inv := prev
	if inv == nil {
		inv = inventory.New(r.invRelease())
	}
	rendered, err := appliedEntries(rel.Resources, results, prevEntries)
	if err != nil {
		return r.res, errors.Join(err, pruneErr)
	}
	inventory.DropApplied(inv)
	for i := range kept {
		// Kept, not applied: a later apply of the same inputs (with the
		// flag that prunes it, or once its annotation is gone) must take
		// the full path, which the fast path only skips when every entry
		// was applied.
		kept[i].Applied = nil
	}
	entries := append(rendered, kept...)
	inv.Record(rel.ChangeID, r.change(entries), opts.now(), opts.MaxHistory)
	r.res.Inventory.Name = inv.Name()
	r.res.Inventory.ChangeIDs = slices.Clone(inv.Index)
	if opts.DryRun && trimmed > 0 {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("the inventory would drop its %d oldest change(s) to stay under %d bytes", trimmed, inventory.MaxSecretBytes))
	}
	if !opts.DryRun {
		if err := r.stillLocked(); err != nil {
			return r.res, errors.Join(fmt.Errorf("%s: the inventory was not written: %w", r.where(), err), pruneErr)
		}
		if err := inventory.Write(ctx, cl.Clientset, inv); err != nil {
			return r.res, errors.Join(fmt.Errorf("%s: %w", r.where(), err), pruneErr)
		}
		r.res.Inventory.Written = true
		r.res.Inventory.ChangeIDs = slices.Clone(inv.Index)
		if inv.Trimmed > 0 {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("the inventory dropped its %d oldest change(s) to stay under %d bytes; it keeps %d", inv.Trimmed, inventory.MaxSecretBytes, len(inv.Index)))
		}
	}
	return r.res, pruneErr
}

// change is what the inventory records for this apply.
func (r *run) change(entries []inventory.Entry) inventory.Change {
	m := r.rel.Module
	c := inventory.Change{
		Module:         inventory.ModuleRef{Path: m.Path, Version: m.Version, Name: m.Name, Local: m.Version == ""},
		Values:         r.rel.ValuesText,
		ManifestDigest: r.rel.ManifestDigest,
		Inventory:      inventory.EntryList{Entries: entries},
		Source:         r.opts.Source,
		Inputs:         r.rel.Fingerprint,
		Sensitive:      r.rel.Sensitive(),
		Reach:          r.rel.Reach.Recorded(),
		ForcedFrom:     r.forcedFrom,
	}
	markSecrets(c.Inventory.Entries, r.rel)
	c.Seal()
	return c
}

// nothingApplied says what a refused apply wrote: nothing, or only the
// release's namespace, created before the checks so the lock and the
// inventory have a place.
func (r *run) nothingApplied() string {
	switch {
	case r.res.NamespaceCreated && !r.opts.DryRun:
		return fmt.Sprintf("nothing was applied but the release's namespace %s (created for the lock and inventory; not recorded, never pruned)", r.rel.Namespace)
	case r.createdNS != manifest.ID{}:
		return fmt.Sprintf("nothing was applied but the release's Namespace %s (created for the lock and inventory as rendered; recorded by the next apply)", r.rel.Namespace)
	}
	return "nothing was applied"
}

// created reports the Namespace ensureNamespace created as created, not as
// the unchanged object the staged apply then found.
func (r *run) created(res objects.Result) objects.Result {
	if res.ID() == r.createdNS && res.Action == manifest.Unchanged {
		res.Action = manifest.Created
	}
	return res
}

// noteForced records the fields an apply took from other managers with
// ForceConflicts: a warning per object, and the managers for the change.
func (r *run) noteForced(res objects.Result) {
	if len(res.Forced) == 0 {
		return
	}
	var fields []string
	for _, c := range res.Forced {
		fields = append(fields, fmt.Sprintf("%s (%s)", c.Field, c.Manager))
		if !slices.Contains(r.forcedFrom, c.Manager) {
			r.forcedFrom = append(r.forcedFrom, c.Manager)
		}
	}
	slices.Sort(r.forcedFrom)
	verb := "took"
	if r.opts.DryRun {
		verb = "would take"
	}
	r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s: %s fields other managers own (--force-conflicts): %s", res.ID(), verb, strings.Join(fields, ", ")))
}

// checkSize encodes the inventory this apply would write at worst (every
// stale object kept) before anything is applied: older changes are
// trimmed to fit, and only a change too big on its own fails, with
// nothing touched. It returns how many changes would be trimmed.
func (r *run) checkSize(prev *inventory.Inventory, stale []inventory.Entry) (int, error) {
	probe := inventory.New(r.invRelease())
	if prev != nil {
		probe = prev.Clone()
	}
	// At worst every object gets an applied record with a resourceVersion
	// as long as etcd's revisions get (20 digits) and a live hash, and
	// history drops its own.
	worst := make(map[manifest.ID]inventory.LiveState, len(r.rel.Resources))
	for _, res := range r.rel.Resources {
		worst[res.ID()] = inventory.LiveState{RV: "18446744073709551615"}
	}
	rendered, err := inventory.WithApplied(r.rel.Resources, worst)
	if err != nil {
		return 0, fmt.Errorf("%s: sizing the inventory: %w", r.where(), err)
	}
	for i := range rendered {
		rendered[i].Applied.Live = inventory.WorstLiveHash
	}
	inventory.DropApplied(probe)
	entries := append(rendered, stale...)
	probe.Record(r.rel.ChangeID, r.change(entries), r.opts.now(), r.opts.MaxHistory)
	if _, err := probe.Encode(); err != nil {
		return 0, fault.Wrap(fault.Validation, fmt.Errorf("%s: %s: %w", r.where(), r.nothingApplied(), err))
	}
	return probe.Trimmed, nil
}

// plan dry-runs the whole staged apply (objects whose CRD or Namespace
// this apply creates are accepted unchecked, as in --dry-run). Any refusal
// fails the apply with nothing applied; with --force, the re-creations it
// finds are announced as warnings before anything is written.
func (r *run) plan(ctx context.Context, resources []manifest.Resource, unchanged map[manifest.ID]objects.Result, live map[manifest.ID]*unstructured.Unstructured, newNamespaces []string) (map[manifest.ID]objects.Result, error) {
	o := r.client.Options()
	o.DryRun = true
	results, err := objects.New(r.cl, o).ApplyAll(ctx, resources, objects.ApplyOptions{Live: live, NewNamespaces: newNamespaces})
	if err != nil {
		// Report what the dry run found: the refused objects as failed,
		// the others as not applied (unchanged ones as they are, also those
		// set apart without a dry run).
		for _, res := range r.sortedWith(results, unchanged) {
			switch res.Action {
			case manifest.Failed, manifest.Unchanged:
			default:
				res.Action, res.Reason = manifest.Skipped, "not applied: the server would refuse another object of this apply"
			}
			r.res.Applied = append(r.res.Applied, objectOf(res))
			r.res.Counts.add(res.Action)
			r.emit(PhaseApply, objectOf(res))
		}
		return nil, fmt.Errorf("%s: the server would refuse this apply (checked with a server-side dry run of every object before changing any), "+
			"so %s, nothing was pruned and the inventory was not written:\n%w", r.where(), r.nothingApplied(), err)
	}
	planned := make(map[manifest.ID]objects.Result, len(results))
	for _, res := range results {
		planned[res.ID()] = res
		if res.Action == manifest.Recreated {
			why := strings.TrimSuffix(res.Reason, ": deleted and re-created (--force)")
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s will be deleted and re-created (--force): %s", res.ID(), why))
		}
	}
	return planned, nil
}

// ghosts finds, with PruneGhosts, the objects that carry this release's
// id (the uuid label: a name alone proves nothing) but are neither
// recorded in prev nor rendered: diff's ghost set. They are added to
// Result.Ghosts.
func (r *run) ghosts(ctx context.Context, prev []inventory.Entry) ([]inventory.Entry, error) {
	if !r.opts.PruneGhosts {
		return nil, nil
	}
	// Identities are all a ghost's entry needs: its deletion reads it again.
	objs, _, err := discover.ByLabels(ctx, r.cl, discover.Query{Namespace: r.rel.Namespace, ReleaseID: r.rel.ReleaseID}, discover.Options{MetadataOnly: true})
	if err != nil {
		return nil, fmt.Errorf("looking for ghosts: %w", err)
	}
	var known []manifest.ID
	for _, e := range prev {
		known = append(known, e.ID)
	}
	for _, res := range r.rel.Resources {
		known = append(known, res.ID())
	}
	var out []inventory.Entry
	for _, u := range discover.Ghosts(objs, known) {
		if u.GetLabels()[manifest.LabelReleaseUUID] != r.rel.ReleaseID || u.GetDeletionTimestamp() != nil {
			continue
		}
		e := discover.EntryOf(u)
		out = append(out, e)
		r.res.Ghosts = append(r.res.Ghosts, objectOfEntry(e))
	}
	r.res.Counts.Ghosts = len(out)
	return out, nil
}

// withGhosts is the stale set plus the ghosts, in delete order.
func withGhosts(stale, ghosts []inventory.Entry) []inventory.Entry {
	if len(ghosts) == 0 {
		return stale
	}
	all := slices.Concat(stale, ghosts)
	inventory.SortForDelete(all)
	return all
}

// withoutGhosts drops ghosts from es: a ghost that was kept (protected)
// stays a ghost rather than being recorded.
func withoutGhosts(es, ghosts []inventory.Entry) []inventory.Entry {
	if len(ghosts) == 0 {
		return es
	}
	g := map[manifest.Key]bool{}
	for _, e := range ghosts {
		g[e.Key()] = true
	}
	return slices.DeleteFunc(es, func(e inventory.Entry) bool { return g[e.Key()] })
}

// lockName is the release lock's Lease name: the inventory Secret's.
func (r *run) lockName() string { return inventory.SecretName(r.rel.Name, r.rel.ReleaseID) }

// acquire takes the release's lock when the options ask for one.
func (r *run) acquire(ctx context.Context) error {
	if r.opts.Lock == nil || r.opts.DryRun {
		return nil
	}
	o := *r.opts.Lock
	o.Labels = map[string]string{
		manifest.LabelManagedBy: manifest.ManagedByOPM, manifest.LabelReleaseName: r.rel.Name,
		manifest.LabelReleaseUUID: r.rel.ReleaseID, inventory.LabelComponent: inventory.ComponentLock,
	}
	o.Unlock = fmt.Sprintf("opm unlock %s -n %s", r.rel.Name, r.rel.Namespace)
	if r.cl.Context != "" {
		// The environment's cluster, which need not be the current context.
		o.Unlock += " --context " + r.cl.Context
	}
	lk, err := lock.Acquire(ctx, r.cl.Clientset, r.rel.Namespace, r.lockName(), o)
	if err != nil {
		return fmt.Errorf("%s: taking the release lock: %w", r.where(), err)
	}
	r.lk = lk
	return nil
}

// release lets the lock go, even when ctx was cancelled (SIGINT/SIGTERM).
func (r *run) release(ctx context.Context) {
	if r.lk == nil {
		return
	}
	if err := r.lk.Release(ctx); err != nil {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("releasing the lock: %v; it expires on its own", err))
	}
	r.lk = nil
}

// stillLocked is nil unless the lock was lost (broken by hand, or not
// renewed in time): then pruning or writing could race another run.
func (r *run) stillLocked() error {
	if r.lk == nil {
		return nil
	}
	return r.lk.Lost()
}

// ensureNamespace creates the release's namespace when it does not exist,
// as Timoni does: the inventory Secret lives there, so a first apply to a
// fresh cluster would otherwise fail. It is not a rendered object, so it is
// neither recorded nor ever pruned. A release that renders its own
// Namespace creates it in the first stage instead. Without permission to
// read namespaces the check is skipped; apply then reports what is missing.
func (r *run) ensureNamespace(ctx context.Context) (bool, error) {
	var rendered *manifest.Resource
	for i, res := range r.rel.Resources {
		if id := res.ID(); id.Group == "" && id.Kind == "Namespace" && id.Name == r.rel.Namespace {
			rendered = &r.rel.Resources[i]
		}
	}
	locking := r.opts.Lock != nil && !r.opts.DryRun
	if rendered != nil && !locking {
		return false, nil
	}
	nss := r.cl.Clientset.CoreV1().Namespaces()
	_, err := nss.Get(ctx, r.rel.Namespace, metav1.GetOptions{})
	switch {
	case err == nil || apierrors.IsForbidden(err):
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("%s: get Namespace %s: %w", r.where(), r.rel.Namespace, err)
	}
	if rendered != nil {
		// The lock needs the namespace before the staged apply would
		// create it: apply it now as rendered (the staged apply then finds
		// it unchanged, reports it created, and records it).
		if res := r.client.Apply(ctx, *rendered, nil, true); res.Err != nil {
			return false, fmt.Errorf("%s: create the release's Namespace %s: %w", r.where(), r.rel.Namespace, res.Err)
		}
		r.createdNS = rendered.ID()
		return false, nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.rel.Namespace,
		Labels: map[string]string{manifest.LabelManagedBy: manifest.ManagedByOPM}}}
	opts := metav1.CreateOptions{FieldManager: objects.FieldManager}
	if r.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := nss.Create(ctx, ns, opts); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("%s: create the release's Namespace %s: %w", r.where(), r.rel.Namespace, err)
	}
	r.res.NamespaceCreated = true
	r.emit(PhaseApply, manifest.Change{Ref: manifest.Ref{Version: "v1", Kind: "Namespace", Name: r.rel.Namespace}, Action: manifest.Created,
		Reason: "the release's namespace (not recorded, never pruned)"})
	return true, nil
}

// preApplyCheck is step 5c: objects not yet recorded must not be
// terminating, nor (unless adopting) exist without this release's labels.
func (r *run) preApplyCheck(rs []manifest.Resource, live map[manifest.ID]*unstructured.Unstructured) error {
	var errs []error
	for _, res := range rs {
		id := res.ID()
		obj := live[id]
		switch {
		case obj == nil:
		case obj.GetDeletionTimestamp() != nil:
			errs = append(errs, &objects.TerminatingError{ID: id})
		case !r.owns(obj) && !r.opts.Adopt:
			errs = append(errs, fmt.Errorf("%s already exists but is not tracked by release %s (it lacks the labels %s=%s and %s=%s): %s",
				id, r.rel.Name, manifest.LabelManagedBy, manifest.ManagedByOPM, manifest.LabelReleaseUUID, r.rel.ReleaseID, manifest.AdoptHint(id)))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: pre-apply check failed, %s:\n%w", r.where(), r.nothingApplied(), errors.Join(errs...))
}

// owns reports whether obj carries this release's OPM labels.
func (r *run) owns(obj *unstructured.Unstructured) bool {
	return manifest.Tracks(obj.GetLabels(), r.rel.Name, r.rel.ReleaseID)
}

// prune deletes the stale set in reverse weight order (one weight at a
// time, concurrently within it). It returns the entries not deleted
// (skipped or failed), which must stay recorded, and those deleted. The
// error joins failed deletes other than Forbidden, which is a warning.
func (r *run) prune(ctx context.Context, stale []inventory.Entry) (kept, deleted []inventory.Entry, err error) {
	var mu sync.Mutex
	var errs []error
	record := func(e inventory.Entry, o manifest.Change, keep bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch o.Action {
		case manifest.Deleted:
			r.res.Pruned = append(r.res.Pruned, o)
		default:
			r.res.Skipped = append(r.res.Skipped, o)
		}
		r.res.Counts.add(o.Action)
		if keep {
			kept = append(kept, e)
		} else {
			deleted = append(deleted, e)
		}
		if err != nil {
			errs = append(errs, err)
		}
		r.emit(PhasePrune, o)
	}

	for _, stage := range deleteStages(stale) {
		g, gctx := workers.WithContext(ctx)
		g.SetLimit(r.client.Options().Concurrency)
		for _, e := range stage {
			o := objectOfEntry(e)
			if reason := r.protected(e); reason != "" {
				o.Action, o.Reason = manifest.Skipped, reason
				if manifest.IsCRD(e.ID) && !r.opts.NoPrune {
					w := r.keptCRD(ctx, e)
					o.Reason += "; " + w
					mu.Lock()
					r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s is no longer rendered: %s (pass --prune-crds to delete it and them)", e.ID, w))
					mu.Unlock()
				}
				record(e, o, true, nil)
				continue
			}
			g.Go(func() error {
				res, err := r.client.DeleteOwned(gctx, e.ID, r.rel.ReleaseID)
				o.Action, o.Reason = res.Action, res.Reason
				if res.Version != "" {
					o.Version = res.Version
				}
				switch {
				case res.KeptBy != "":
					mu.Lock()
					r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s is no longer rendered but its %s annotation is %q: kept (and still recorded)", e.ID, res.KeptBy, manifest.ResourcePolicyKeep))
					mu.Unlock()
					record(e, o, true, nil)
				case res.NotOurs:
					mu.Lock()
					r.res.Counts.NotOurs++
					r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s is recorded in the inventory but does not carry this release's id: kept (and still recorded); if it was added to the inventory by hand, remove it with `opm inventory repair`", e.ID))
					mu.Unlock()
					record(e, o, true, nil)
				case err == nil:
					record(e, o, false, nil)
				case apierrors.IsForbidden(err):
					o.Action, o.Reason = manifest.Skipped, "delete forbidden: "+err.Error()
					mu.Lock()
					r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s was not pruned: the delete was forbidden (RBAC); it stays in the inventory", e.ID))
					mu.Unlock()
					record(e, o, true, nil)
				default:
					o.Reason = err.Error()
					record(e, o, true, err)
				}
				return nil
			})
		}
		_ = g.Wait()
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
	}
	// Concurrent deletes finish in any order; report in delete order.
	order := func(a, b manifest.Change) int { return manifest.CompareIDs(b.ID(), a.ID()) }
	slices.SortStableFunc(r.res.Pruned, order)
	slices.SortStableFunc(r.res.Skipped, order)
	inventory.SortForDelete(kept)
	if len(errs) > 0 {
		return kept, deleted, fmt.Errorf("%s: pruning failed for %d object(s), which stay in the inventory: %w", r.where(), len(errs), errors.Join(errs...))
	}
	return kept, deleted, nil
}

// protected says why a stale entry must not be deleted, or "".
func (r *run) protected(e inventory.Entry) string {
	if r.opts.NoPrune {
		return "pruning is off (--no-prune)"
	}
	if g, ok := manifest.GuardOf(e.ID.GroupKind()); ok && !r.opts.unguarded().Allows(g) {
		return fmt.Sprintf("%ss are pruned only with %s (deleting one deletes %s)", g.Kind, g.Flag, g.Loses)
	}
	return ""
}

func (o Options) unguarded() manifest.Unguarded {
	return manifest.Unguarded{Namespaces: o.PruneNamespaces, PVCs: o.PrunePVCs, CRDs: o.PruneCRDs}
}

// keptCRD says what a kept CRD still serves: the custom resources that
// deleting it would have deleted.
func (r *run) keptCRD(ctx context.Context, e inventory.Entry) string {
	n, err := r.client.CustomResources(ctx, e.Name)
	if err != nil {
		return fmt.Sprintf("kept, with the custom resources it serves (they could not be counted: %v)", err)
	}
	return fmt.Sprintf("kept, with the %d custom resource(s) it still serves cluster-wide", n)
}

// deleteStages groups entries (already in delete order) by weight.
func deleteStages(es []inventory.Entry) [][]inventory.Entry {
	var stages [][]inventory.Entry
	last := 0
	for i, e := range es {
		w := manifest.Weight(e.ID.GroupKind())
		if i == 0 || w != last {
			stages = append(stages, nil)
			last = w
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], e)
	}
	return stages
}

// Prune deletes the stale set of rel (what the inventory's latest change
// recorded that rel no longer renders) without applying anything, with the
// same protections as Apply, then rewrites the latest change without the
// objects it deleted. A release without an inventory has nothing to prune.
func Prune(ctx context.Context, cl *kube.Cluster, rel *render.Release, opts Options) (*Result, error) {
	start := time.Now()
	r := newRun(cl, rel, opts)
	defer func() { r.res.Duration = time.Since(start) }()

	if err := r.acquire(ctx); err != nil {
		if apierrors.IsNotFound(err) {
			// No namespace, so no inventory: nothing to prune.
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s: namespace %s does not exist: nothing to prune", r.where(), rel.Namespace))
			return r.res, nil
		}
		return r.res, err
	}
	defer r.release(ctx)

	inv, prevEntries, stale, err := r.readInventory(ctx)
	if err != nil {
		return r.res, err
	}
	if inv == nil {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s has no inventory Secret: nothing to prune", r.where()))
		return r.res, nil
	}
	if err := r.refuseEmpty(prevEntries); err != nil {
		return r.res, err
	}
	ghosts, err := r.ghosts(ctx, prevEntries)
	if err != nil {
		return r.res, err
	}
	_, deleted, pruneErr := r.prune(ctx, withGhosts(stale, ghosts))
	deleted = withoutGhosts(deleted, ghosts)
	if len(deleted) == 0 || opts.DryRun {
		return r.res, pruneErr
	}
	if err := r.stillLocked(); err != nil {
		return r.res, errors.Join(fmt.Errorf("%s: the inventory was not written: %w", r.where(), err), pruneErr)
	}
	gone := map[manifest.Key]bool{}
	for _, e := range deleted {
		gone[e.Key()] = true
	}
	remaining := slices.DeleteFunc(slices.Clone(prevEntries), func(e inventory.Entry) bool { return gone[e.Key()] })
	if err := inv.SetLatestEntries(remaining, opts.now()); err != nil {
		return r.res, errors.Join(err, pruneErr)
	}
	if err := inventory.Write(ctx, cl.Clientset, inv); err != nil {
		return r.res, errors.Join(fmt.Errorf("%s: %w", r.where(), err), pruneErr)
	}
	r.res.Inventory.Written = true
	return r.res, pruneErr
}

// Line is the kubectl-style progress line of an event: "kind.group/name
// action", with the reason of skipped and failed objects. It never shows
// object content, so Secret values cannot leak into logs.
func (e Event) Line() string {
	o := e.Object
	kind := strings.ToLower(o.Kind)
	if o.Group != "" {
		kind += "." + o.Group
	}
	s := kind + "/" + o.Name
	if o.Namespace != "" && o.Namespace != e.Namespace {
		s += " -n " + o.Namespace
	}
	s += " " + string(o.Action)
	if e.DryRun {
		s += " (server dry run)"
	}
	if o.Reason != "" {
		s += ": " + o.Reason
	}
	return s
}

// markSecrets flags the entries of objects a secret reaches (engine/taint),
// so that once they are no longer rendered the inventory still says their
// content and name are not for public outputs.
func markSecrets(entries []inventory.Entry, rel *render.Release) {
	if len(rel.SecretFields) == 0 {
		return
	}
	tainted := make(map[manifest.ID][]taint.Field, len(rel.Resources))
	for i, res := range rel.Resources {
		if i < len(rel.SecretFields) && len(rel.SecretFields[i]) > 0 {
			tainted[res.ID()] = rel.SecretFields[i]
		}
	}
	for i, e := range entries {
		if fs, ok := tainted[e.ID]; ok {
			entries[i].Secret = true
			entries[i].SecretName = taint.NameTainted(fs)
		}
	}
}
