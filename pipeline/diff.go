package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/preview"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/change"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// DiffOptions are the options of Diff.
type DiffOptions struct {
	Selection
	ClusterOptions
	Protection
	// NoGhosts skips the label scan that finds ghosts.
	NoGhosts bool `json:"noGhosts,omitempty"`
	// AllEnvironments diffs every environment the deployment declares,
	// Environments each one listed (Selection.Environment is then
	// ignored), one after the other: what a scheduled drift check runs. An
	// environment that fails to render becomes one error row and the
	// others are still diffed.
	AllEnvironments bool     `json:"allEnvironments,omitempty"`
	Environments    []string `json:"environments,omitempty"`
	// NoSkip renders every release, even one whose inputs are those of
	// its recorded change with nothing on the cluster moved.
	NoSkip bool `json:"noSkip,omitempty"`
}

// Diff compares the rendered releases with their clusters: each object
// added, modified or unchanged (server-side dry run), the stale set apply
// would prune, and ghosts. A release whose cluster cannot be reached is
// reported with Error set and the others are still compared; the returned
// error then joins every such failure.
func Diff(ctx context.Context, opts DiffOptions) (*ChangeSet, error) {
	if opts.NoSkip {
		ctx = operation.WithTransforms(ctx, nil) // --no-skip transforms every component too
	}
	if opts.AllEnvironments || len(opts.Environments) > 0 {
		return diffEach(ctx, opts)
	}
	return routed(ctx, opts.Selection,
		func() (*ChangeSet, error) { return diffEnvironment(ctx, opts) },
		func(envs []FleetEnvironment) (*ChangeSet, error) { return diffFleet(ctx, opts, envs) })
}

// diffEnvironment is Diff in one environment (or none).
func diffEnvironment(ctx context.Context, opts DiffOptions) (*ChangeSet, error) {
	cl := newClusters(ctx, opts.ClusterOptions)
	// One key for the whole output: equal Secret values mask equally.
	m := diff.NewMasker()
	// The identities of the fast path and the render after it are of the
	// same deployment: it is loaded once.
	ctx = operation.WithLoads(ctx)
	sel := opts.Selection
	unmoved, order, prefetched, err := diffUnmoved(ctx, cl, opts, m)
	if err != nil {
		return nil, err
	}
	needRender := true
	if len(order) > 0 {
		var rest []string
		for _, k := range order {
			if _, ok := unmoved[k]; !ok {
				rest = append(rest, k)
			}
		}
		needRender = len(rest) > 0
		if len(rest) < len(order) {
			// Only what moved; the selection as given otherwise, so the
			// render is of the load the identities made.
			sel.Releases = rest
		}
	}
	var rels []*render.Release
	if needRender {
		var err error
		rels, err = render.Render(ctx, sel.RenderOptions(ctx))
		if err != nil {
			return nil, err
		}
	}
	rendered := map[string]*render.Release{}
	for _, rel := range rels {
		rendered[rel.Key] = rel
		if len(order) == 0 {
			order = append(order, rel.Key)
		}
	}
	cs := &ChangeSet{Operation: "diff", Releases: make([]ReleaseChanges, 0, len(order))}
	var errs []error
	for _, key := range order {
		rc, ok := unmoved[key]
		if rel := rendered[key]; !ok && rel != nil {
			var err error
			if rc, err = diffRelease(ctx, cl, rel, opts, m, prefetched[key]); err != nil {
				// A refusal of the server's dry run quotes what it
				// refuses, as apply's does: masked the same way.
				err = redactRefusal(rel, err)
				rc.Error = err.Error()
				errs = append(errs, fmt.Errorf("release %s: %w", rel.Name, err))
			}
		}
		cs.Releases = append(cs.Releases, rc)
		cs.Counts.AddAll(rc.Counts)
	}
	return cs, errors.Join(errs...)
}

// diffUnmoved diffs without a render every release whose inputs are its
// recorded change's, with nothing on the cluster moved (preview.Unmoved),
// from one read of each release's cluster state (preview.StartPrefetch),
// which the render of the others then overlaps. order is every selected key (nil
// when the identities could not be evaluated: the render then reports
// why).
func diffUnmoved(ctx context.Context, cl *clusters, opts DiffOptions, m *diff.Masker) (unmoved map[string]ReleaseChanges, order []string, prefetched map[string]*preview.Prefetch, err error) {
	fps := fingerprints(ctx, opts.Selection)
	if fps == nil {
		return nil, nil, nil, nil
	}
	sel := opts.Selection
	ids, err := identities(ctx, sel, fps)
	if errors.Is(err, errWrongIdentity) {
		return nil, nil, nil, err
	}
	if err != nil {
		return nil, nil, nil, nil // the render says what is wrong
	}
	unmoved, prefetched = map[string]ReleaseChanges{}, map[string]*preview.Prefetch{}
	for _, id := range ids {
		order = append(order, id.Key)
		id.Fingerprint = fps[id.Key]
		cluster, err := cl.For(ctx, id)
		if err != nil {
			continue
		}
		// What the cluster holds is read once, for the skip and, when it
		// does not hold, for the full diff while that renders.
		pf := preview.StartPrefetch(ctx, cluster, id, preview.Options{Ghosts: !opts.NoGhosts})
		var pv *preview.Result
		ok := false
		if !opts.NoSkip {
			pv, ok, err = preview.Unmoved(ctx, cluster, id, preview.Options{Ghosts: !opts.NoGhosts, Masker: maskerOf(m, id), Prefetched: pf})
		}
		if err != nil || !ok {
			// The full diff decides, and reports what went wrong.
			prefetched[id.Key] = pf
			continue
		}
		latest, c, _ := pv.Inventory.Latest()
		if err := verifySkip(ctx, cluster, sel, id.Key, latest, c.ManifestDigest); err != nil {
			return nil, nil, nil, err
		}
		rc := ReleaseChanges{
			Name: id.Name, Namespace: id.Namespace, Environment: id.Environment, ReleaseID: id.ReleaseID,
			Head:            Revision{ManifestDigest: c.ManifestDigest, ChangeID: latest},
			Base:            &Revision{ManifestDigest: c.ManifestDigest, ChangeID: latest},
			InputsIdentical: true,
		}
		for _, o := range pv.Objects {
			rc.Sensitive = rc.Sensitive || o.ID().IsSecret()
			if o.Action == manifest.Ghost {
				rc.Warnings = append(rc.Warnings, fmt.Sprintf("ghost %s: carries this release's labels but is in neither the inventory nor the render", o.ID()))
			}
			rc.Objects = append(rc.Objects, o)
			rc.Counts.Add(o.Action)
		}
		unmoved[id.Key] = rc
	}
	return unmoved, order, prefetched, nil
}

func diffRelease(ctx context.Context, cl *clusters, rel *render.Release, opts DiffOptions, m *diff.Masker, pf *preview.Prefetch) (ReleaseChanges, error) {
	rc := ReleaseChanges{
		Name: rel.Name, Namespace: rel.Namespace, Environment: rel.Environment, ReleaseID: rel.ReleaseID,
		Head:      Revision{ManifestDigest: rel.ManifestDigest, ChangeID: rel.ChangeID},
		Sensitive: rel.Sensitive(),
	}
	cluster, scoped, err := cl.forRelease(ctx, rel)
	if err != nil {
		rc.Unreachable = fault.KindOf(err) == fault.Connectivity
		return rc, err
	}
	// As applied: the cluster may have re-scoped objects (engine/scope).
	rc.Head = Revision{ManifestDigest: rel.ManifestDigest, ChangeID: rel.ChangeID}
	rc.Warnings = append(append(rc.Warnings, rel.Warnings...), scoped...)
	rc.Reach = change.ReachOf(rel.Resources)
	pv, err := preview.Release(ctx, cluster, rel, preview.Options{Ghosts: !opts.NoGhosts, Masker: maskerOf(m, rel), Prefetched: pf})
	if err != nil {
		rc.Unreachable = fault.KindOf(err) == fault.Connectivity
		return rc, err
	}
	if pv.Inventory != nil {
		if w := inventory.OutsideWarning(pv.Inventory.Name(), pv.Outside); w != "" {
			rc.Warnings = append(rc.Warnings, w)
		}
		if id, ch, ok := pv.Inventory.Latest(); ok {
			rc.Base = &Revision{ManifestDigest: ch.ManifestDigest, ChangeID: id}
			for _, e := range ch.Inventory.Entries {
				rc.Sensitive = rc.Sensitive || e.IsSecret()
			}
		}
	}
	for _, o := range pv.Objects {
		if o.Action == manifest.Stale {
			e := inventory.EntryFor(o.Ref)
			if w, relWarn := opts.Protection.Warnings(e, o.KeptBy); w != "" {
				o.Warning = joinWarnings(w, o.Warning)
				rc.Warnings = append(rc.Warnings, relWarn)
			}
		}
		if o.Action == manifest.Ghost {
			rc.Warnings = append(rc.Warnings, fmt.Sprintf("ghost %s: carries this release's labels but is in neither the inventory nor the render", o.ID()))
		}
		rc.Objects = append(rc.Objects, o)
		rc.Counts.Add(o.Action)
	}
	if rc.Counts.Ghost > 0 {
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("%d ghost(s): `opm apply --prune-ghosts` or `opm prune --ghosts` deletes those that carry this release's id, with apply's protections", rc.Counts.Ghost))
	}
	if len(rel.Resources) == 0 && rc.Counts.Stale > 0 {
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("the render is empty: apply would prune all %d recorded objects, so it refuses without --force", rc.Counts.Stale))
	}
	rc.Redact(rel.Secrets)
	rc.OrderHidden(redact.From(ctx))
	return rc, nil
}

func joinWarnings(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// diffFleet diffs each environment of a fleet, in wave order.
func diffFleet(ctx context.Context, opts DiffOptions, envs []FleetEnvironment) (*ChangeSet, error) {
	opts.Selection = opts.Selection.ForEnvironment("")
	for _, e := range envs {
		opts.Environments = append(opts.Environments, e.Name)
	}
	return diffEach(ctx, opts)
}

// maskerOf is the run's masker for the objects of rel: its markers belong
// to the release in its environment, so equal values of two releases (or
// of one release in two environments) are never linked.
func maskerOf(m *diff.Masker, rel *render.Release) *diff.Masker {
	return m.In(rel.Environment + "\x00" + rel.Key)
}
