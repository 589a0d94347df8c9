// Package preview computes what applying a rendered release would change
// on its cluster, changing nothing: for every rendered object whether it
// would be added, modified or left unchanged (a server-side dry-run apply
// compared with the live object, with a readable diff); which recorded
// objects would be pruned (the stale set, after the component-rename
// check); and ghosts — objects that carry the release's labels but are in
// neither the inventory nor the render (inventory RFC scenario F).
//
// Like kubectl diff --server-side it lets the API server compute the
// result, so defaults, admission and merges are the server's, not a guess.
package preview

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/render"
	pool "github.com/opmodel/pipeline/engine/workers"
)

// Options tune a preview.
type Options struct {
	// Ghosts scans the cluster by label for ghosts (one LIST per type and
	// selector); off, only the inventory and the render are read.
	Ghosts bool
	// Workers bounds concurrent requests; 8 when zero.
	Workers int
	// Masker masks Secret values in diffs; one per run (a fresh one when nil).
	Masker *diff.Masker
	// Prefetched, when started for the same release (StartPrefetch), is
	// used instead of reading the inventory, the recorded objects and the
	// labelled ones again.
	Prefetched *Prefetch
}

// workers is Options.Workers, 8 when zero.
func (o Options) workers() int {
	if o.Workers <= 0 {
		return 8
	}
	return o.Workers
}

// Object is one object's preview: the engine's one per-object outcome,
// whose Action is what the comparison finds (added, modified, unchanged,
// stale or ghost — a write's words never appear here), Diff a unified YAML
// diff with Secret values masked, Warning why apply would not act as the
// change suggests, and KeptBy the annotation that keeps a stale object.
type Object = manifest.Change

// Result is the preview of one release.
type Result struct {
	// Inventory is the release's current inventory, nil on first install.
	Inventory *inventory.Inventory
	// Objects: rendered ones in apply order, then stale, then ghosts.
	Objects []Object
	// Discovery says how ghosts were looked for and what it cost.
	Discovery discover.Stats
	// Outside are the inventory's entries beyond the environment's reach:
	// neither read nor listed as stale (inventory.OutsideWarning).
	Outside []inventory.Entry
}

// Release previews applying rel to cl.
func Release(ctx context.Context, cl *kube.Cluster, rel *render.Release, opts Options) (*Result, error) {
	workers := opts.workers()
	pf := opts.Prefetched.forRelease(rel, opts.Ghosts)
	var inv *inventory.Inventory
	if pf != nil {
		inv = pf.inv
	} else {
		var err error
		invRel := inventory.Release{Name: rel.Name, Namespace: rel.Namespace, ReleaseID: rel.ReleaseID, Environment: rel.Environment}
		if inv, err = inventory.Read(ctx, cl.Clientset, invRel); err != nil {
			return nil, err
		}
	}
	res := &Result{Inventory: inv}
	client := objects.New(cl, objects.Options{DryRun: true})
	m := opts.Masker
	if m == nil {
		m = diff.NewMasker()
	}

	current := inventory.Entries(rel.Resources)
	carriedSecret := map[manifest.ID]bool{}
	var previous []inventory.Entry
	if inv != nil {
		previous, res.Outside = inv.LatestWithin(rel.Reach.Recorded())
		for _, e := range previous {
			if e.Secret || e.SecretName {
				carriedSecret[e.ID] = true
			}
		}
	}

	// The ghost scan (one LIST per type and selector) needs nothing from
	// the previews: run it beside them.
	var labelled []*unstructured.Unstructured
	var scan pool.Group
	var scanErr error
	switch {
	case opts.Ghosts && pf != nil:
		labelled, res.Discovery = pf.labelled, pf.stats
	case opts.Ghosts:
		scan.Go(func() {
			labelled, res.Discovery, scanErr = discover.ByLabels(ctx, cl, discover.Query{Namespace: rel.Namespace, ReleaseName: rel.Name, ReleaseID: rel.ReleaseID}, discover.Options{Workers: workers, MetadataOnly: true})
		})
	}

	// Live objects are read in batches (one LIST per type and namespace by
	// the release-id label, a GET for what that misses) instead of one GET
	// each; the dry runs that follow are necessarily one per object.
	live, err := liveObjects(ctx, cl, current, pf, workers, rel.ReleaseID)
	if err != nil {
		scan.Wait()
		return nil, fmt.Errorf("reading the live objects of release %s: %w", rel.Name, err)
	}
	recorded := make(map[manifest.ID]bool, len(previous))
	for _, e := range previous {
		recorded[e.ID] = true
	}
	rendered := make([]Object, len(rel.Resources))
	applied := recordedApplied(inv)
	// What was read as metadata only is told unchanged by its version, or
	// read whole: the dry run and the diff need the object.
	told := make([]bool, len(rel.Resources))
	var whole []int
	for i, r := range rel.Resources {
		if f := live[i]; f.Partial {
			if inventory.UnchangedByVersion(applied[r.ID()], r, f.Object) {
				rendered[i], told[i] = unchanged(r), true
			} else {
				whole = append(whole, i)
			}
		}
	}
	if len(whole) > 0 {
		if err := discover.Whole(ctx, cl, live, whole, discover.Options{Workers: workers, ReleaseID: rel.ReleaseID}); err != nil {
			scan.Wait()
			return nil, fmt.Errorf("reading the live objects of release %s: %w", rel.Name, err)
		}
	}
	g, gctx := pool.WithContext(ctx)
	g.SetLimit(workers)
	for i, r := range rel.Resources {
		if told[i] {
			continue
		}
		if o, ok := unchangedSinceApplied(applied, r, live[i].Object); ok {
			rendered[i] = o
			continue
		}
		g.Go(func() error {
			om := m
			if i < len(rel.SecretFields) {
				// Values from secret sources may reach any object.
				om = m.ForObject(rel.SecretFields[i])
			}
			o, err := previewObject(gctx, client, r, live[i].Object, om)
			if lv := live[i].Object; err == nil && lv != nil && !recorded[r.ID()] && !manifest.Tracks(lv.GetLabels(), rel.Name, rel.ReleaseID) {
				// Apply's pre-apply check refuses it: say so now.
				o.Warning = joinWarning(o.Warning, "exists without this release's labels, so apply refuses it unless --adopt: "+manifest.AdoptHint(r.ID()))
			}
			if err == nil && o.Diff != "" && carriedSecret[r.ID()] && (i >= len(rel.SecretFields) || len(rel.SecretFields[i]) == 0) {
				// A secret reached the applied object and no longer
				// reaches the render: only the live side holds it, at
				// fields nothing traces now.
				o.Diff, o.Warning = "", joinWarning(o.Warning, Withheld)
			}
			rendered[i] = o
			return err
		})
	}
	if err := g.Wait(); err != nil {
		scan.Wait()
		return nil, err
	}
	res.Objects = rendered
	stale, err := previewStale(ctx, client, inventory.Stale(previous, current), workers, m)
	if err != nil {
		return nil, err
	}
	res.Objects = append(res.Objects, stale...)

	if scan.Wait(); scanErr != nil {
		return nil, fmt.Errorf("looking for ghosts of release %s: %w", rel.Name, scanErr)
	}
	if opts.Ghosts {
		if rel.Sensitive() {
			m = nil // nothing says which of a ghost's fields a secret reached
		}
		if err := res.addGhosts(ctx, cl, labelled, m, ids(current), ids(previous)); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// liveObjects reads the live object of each entry: what a prefetch read
// already (the objects the inventory records, as metadata until read
// whole), the rest whole, in batches.
func liveObjects(ctx context.Context, cl *kube.Cluster, current []inventory.Entry, pf *Prefetch, workers int, releaseID string) ([]discover.Found, error) {
	if pf == nil {
		found, _, err := discover.FromInventory(ctx, cl, current, discover.Options{Workers: workers, ReleaseID: releaseID})
		return found, err
	}
	out := make([]discover.Found, len(current))
	var missing []inventory.Entry
	var at []int
	for i, e := range current {
		k, ok := pf.at[e.ID]
		if !ok {
			missing, at = append(missing, e), append(at, i)
			continue
		}
		f := pf.recorded[k]
		out[i] = discover.Found{Entry: e, Object: f.Object, Missing: f.Missing, Partial: f.Partial}
	}
	if len(missing) > 0 {
		found, _, err := discover.FromInventory(ctx, cl, missing, discover.Options{Workers: workers, ReleaseID: releaseID})
		if err != nil {
			return nil, err
		}
		for j, f := range found {
			out[at[j]] = f
		}
	}
	return out, nil
}

// addGhosts adds what carries the release's labels but none of known.
// The scan read metadata only; a ghost whose content is shown is read
// whole, and one gone since is no ghost.
func (res *Result) addGhosts(ctx context.Context, cl *kube.Cluster, labelled []*unstructured.Unstructured, m *diff.Masker, known ...[]manifest.ID) error {
	for _, u := range discover.Ghosts(labelled, known...) {
		o := manifest.ChangeOf(discover.IDOf(u), u.GroupVersionKind().Version, u.GetLabels()[manifest.LabelComponentName], manifest.Ghost)
		o.Warning = "carries this release's labels but is in neither the inventory nor the render (left by a failed apply?); apply --prune-ghosts or prune --ghosts deletes it"
		if m == nil {
			o.Warning = joinWarning(o.Warning, Withheld)
			res.Objects = append(res.Objects, o)
			continue
		}
		whole, err := discover.Fetch(ctx, cl, u)
		if err != nil {
			return fmt.Errorf("reading ghost %s: %w", discover.IDOf(u), err)
		}
		if whole == nil {
			continue
		}
		if o.Diff, err = diff.Unified(whole, nil, diff.Options{FromFile: "live", ToFile: "ghost", Masker: m}); err != nil {
			return err
		}
		res.Objects = append(res.Objects, o)
	}
	return nil
}

// Unmoved previews a release that was not rendered (rel carries its
// identity and Fingerprint only), without a dry run, when its inputs are those of the inventory's latest change and every object that
// change records is Untouched since: each is then unchanged, and only the
// ghost scan is left to do. ok is false when either does not hold; the
// full preview decides then. It reads what a Prefetch reads — the one given
// in opts (started for rel with the same Ghosts), else one of its own — so
// the recorded objects and the ghost scan are read side by side, and the
// full preview that follows a moved release reads nothing again.
func Unmoved(ctx context.Context, cl *kube.Cluster, rel *render.Release, opts Options) (res *Result, ok bool, err error) {
	pf := opts.Prefetched
	if pf == nil || !pf.of(rel) || pf.ghosts != opts.Ghosts {
		pf = StartPrefetch(ctx, cl, rel, opts)
	}
	inv, err := pf.inventory()
	if err != nil {
		return nil, false, err
	}
	// Decided on the inventory alone, so a release whose inputs moved is
	// rendered while the rest is still being read.
	_, c, ok := inv.SameInputs(rel.Fingerprint)
	if !ok {
		return nil, false, nil
	}
	if err := pf.wait(); err != nil {
		return nil, false, err
	}
	entries := c.Inventory.Entries
	if !rel.Reach.AllowsAll(entries) {
		// Entries outside the reach are never read (that would tell their
		// existence and versions): the full path leaves them alone and
		// says so.
		return nil, false, nil
	}
	res = &Result{Inventory: inv}
	if len(entries) != len(pf.recorded) {
		return nil, false, nil
	}
	for _, e := range entries {
		if _, read := pf.at[e.ID]; !read {
			return nil, false, nil
		}
		res.Objects = append(res.Objects, manifest.Change{Ref: e.Ref(), Action: manifest.Unchanged})
	}
	// The recorded entries are the ones read (the same change, all within
	// reach): told by their versions, or read whole where those moved.
	untouched, err := discover.Untouched(ctx, cl, pf.recorded, discover.Options{Workers: opts.workers(), ReleaseID: rel.ReleaseID})
	if err != nil || !untouched {
		return nil, false, err
	}
	if opts.Ghosts {
		res.Discovery = pf.stats
		m := opts.Masker
		if m == nil {
			m = diff.NewMasker()
		}
		if c.HoldsSecrets() {
			m = nil // nothing says which of a ghost's fields a secret reached
		}
		if err := res.addGhosts(ctx, cl, pf.labelled, m, ids(entries)); err != nil {
			return nil, false, err
		}
	}
	return res, true, nil
}

// previewObject previews one rendered object; live is what the cluster
// holds (nil when absent).
func previewObject(ctx context.Context, client *objects.Client, r manifest.Resource, live *unstructured.Unstructured, m *diff.Masker) (Object, error) {
	o := manifest.ChangeOf(r.ID(), r.GVK().Version, r.Component, "")
	p, err := client.Preview(ctx, r, live, true)
	var ie *objects.ImmutableError
	var ce *objects.ConflictError
	switch {
	case errors.As(err, &ie):
		o.Action = manifest.Modified
		o.Warning = ie.Error()
		o.Diff, err = diff.Unified(p.Live, r.Object, diff.Options{FromFile: "live", ToFile: "rendered", Masker: m})
		return o, err
	case errors.As(err, &ce):
		o.Action = manifest.Modified
		o.Warning = ce.Error()
		o.Diff, err = diff.Unified(p.Live, r.Object, diff.Options{FromFile: "live", ToFile: "rendered", Masker: m})
		return o, err
	case err != nil:
		return o, err
	case p.Live == nil:
		o.Action = manifest.Added
		o.Diff, err = diff.Unified(nil, p.Object, diff.Options{FromFile: "live", ToFile: "planned", Masker: m})
		return o, err
	}
	o.Diff, err = diff.Unified(p.Live, p.Object, diff.Options{FromFile: "live", ToFile: "planned", Masker: m})
	o.Action = manifest.Modified
	o.Warning = p.Ownership
	if o.Diff == "" && !p.TakesOwnership {
		o.Action = manifest.Unchanged
	}
	return o, err
}

func previewStale(ctx context.Context, client *objects.Client, stale []inventory.Entry, workers int, m *diff.Masker) ([]Object, error) {
	out := make([]Object, len(stale))
	var mu sync.Mutex
	g, gctx := pool.WithContext(ctx)
	g.SetLimit(workers)
	for i, e := range stale {
		g.Go(func() error {
			o := manifest.Change{Ref: e.Ref(), Action: manifest.Stale}
			live, err := client.Get(gctx, e.ID.GroupKind().WithVersion(""), e.Namespace, e.Name)
			if err == nil {
				o.KeptBy = manifest.KeptBy(live.GetAnnotations())
			}
			if err == nil && manifest.IsCRD(e.ID) {
				// What a prune of it would take with it.
				// An identity with only the rights `opm rbac` prints may not
				// list another team's custom resources: say so, as apply does.
				if n, cerr := client.CustomResources(gctx, e.Name); cerr != nil {
					o.Warning = joinWarning(o.Warning, "the custom resources it serves could not be counted (no right to list them)")
				} else {
					o.Warning = joinWarning(o.Warning, fmt.Sprintf("serves %d custom resource(s) in the cluster", n))
				}
			}
			if err == nil && (e.Secret || e.SecretName) {
				o.Warning = joinWarning(o.Warning, Withheld)
			} else if err == nil {
				o.Diff, err = diff.Unified(live, nil, diff.Options{FromFile: "live", ToFile: "pruned", Masker: m})
			} else if isGone(err) {
				o.Warning, err = joinWarning(o.Warning, "already gone from the cluster"), nil
			}
			mu.Lock()
			out[i] = o
			mu.Unlock()
			return err
		})
	}
	return out, g.Wait()
}

// Withheld replaces the diff of an object a secret reached where nothing
// says which of its fields: the object is listed, its content is not.
const Withheld = "content withheld: a secret reached this object, and which of its fields cannot be told"

func joinWarning(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func ids(es []inventory.Entry) []manifest.ID {
	out := make([]manifest.ID, 0, len(es))
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// isGone reports an object, or its whole kind, no longer on the cluster.
func isGone(err error) bool { return apierrors.IsNotFound(err) || fault.KindOf(err) == fault.NotFound }
