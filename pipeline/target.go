package pipeline

import (
	"context"
	"fmt"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/scope"
)

// Target says which deployed releases Status and Delete act on: the
// releases of a deployment directory (Selection), or one release named on
// the command line by namespace and name and/or release id, which needs no
// source at all.
type Target struct {
	Selection
	// Name and ReleaseID select a release without rendering; Namespace is
	// then required.
	Name      string `json:"name,omitempty"`
	ReleaseID string `json:"releaseId,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// ByName reports whether the target names one release instead of a directory.
func (t Target) ByName() bool { return t.Name != "" || t.ReleaseID != "" }

func (t Target) validate() error {
	if t.ByName() && t.Namespace == "" {
		return fault.Validationf("--namespace is required with --name or --release-id")
	}
	if !t.ByName() && t.Namespace != "" {
		return fault.Validationf("--namespace selects a release only with --name or --release-id; to use a deployment directory, drop --namespace")
	}
	return nil
}

// deployed is one release as found on a cluster.
type deployed struct {
	name, namespace, environment, releaseID string
	// moduleID is known when the release was rendered.
	moduleID string
	cluster  *kube.Cluster
	inv      *inventory.Inventory
	// renderObjects renders the release in full, for the ghost check; nil
	// when the release was selected by name (there is nothing to render).
	renderObjects func(context.Context) ([]manifest.Resource, error)
	// entries are the release's objects: the inventory's latest change,
	// else what the label scan found.
	entries []inventory.Entry
	// terminating are the entries the label scan found already being
	// deleted (finalizers pending): status shows them, delete leaves them.
	terminating []inventory.Entry
	strategy    string
	requests    int
	// ghosts carry the release's labels but are in neither the inventory
	// nor the render; only looked for when an inventory exists.
	ghosts []inventory.Entry
	// byName: selected by --name or --release-id, with no deployment to
	// say what the release is; its inventory is verified before use.
	byName bool
	// reach is where the environment lets the release write, from the
	// deployment directory; the inventory's entries beyond it (outside)
	// are never read. nil when selected by name (Verify bounds those).
	reach   *inventory.Reach
	outside []inventory.Entry
}

// resolve finds the targeted releases and their objects: the inventory
// first (targeted GETs later), else a label scan (pre-inventory releases,
// or a deleted inventory Secret).
func resolve(ctx context.Context, t Target, opts ClusterOptions, ghosts bool) ([]*deployed, error) {
	return resolveRendered(ctx, t, opts, ghosts, nil)
}

// resolveCached is resolve for a reader (status): identities come from the
// identity cache by input fingerprint when every selected release has an
// entry, so nothing is evaluated, as for apply's fast path. An entry whose
// release has no inventory where it says is not trusted: the identities
// are rendered again and the answer is the render's.
func resolveCached(ctx context.Context, t Target, opts ClusterOptions, ghosts bool) ([]*deployed, error) {
	if t.ByName() {
		return resolve(ctx, t, opts, ghosts)
	}
	sel := t.Selection
	fps := fingerprints(ctx, sel)
	if fps == nil {
		return resolve(ctx, t, opts, ghosts)
	}
	ids, hit := newIdentityCache().all(ctx, sel, fps)
	if !hit {
		// identities renders them and fills the cache for the next reader.
		var err error
		if ids, err = identities(ctx, sel, fps); err != nil {
			return nil, err
		}
		return resolveRendered(ctx, t, opts, ghosts, ids)
	}
	if err := verifyIdentities(ctx, sel, ids); err != nil {
		return nil, err
	}
	ds, err := resolveRendered(ctx, t, opts, ghosts, ids)
	if err != nil {
		return resolve(ctx, t, opts, ghosts)
	}
	for _, d := range ds {
		if d.inv == nil {
			return resolve(ctx, t, opts, ghosts)
		}
	}
	return ds, nil
}

// resolveRendered is resolve for releases whose identities are known: when
// rendered is not nil (an apply waiting for what it applied, or
// identities a status read from the cache), the deployment is not loaded
// and rendered again for them; the ghost check renders their objects only
// when a release has none.
func resolveRendered(ctx context.Context, t Target, opts ClusterOptions, ghosts bool, rendered []*render.Release) ([]*deployed, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	cl := newClusters(ctx, opts)
	if t.ByName() {
		id := &render.Release{}
		if t.Environment != "" {
			// The environment is known: act as its identity, so the API
			// server's RBAC bounds what the release may touch.
			c, err := render.EnvironmentCluster(ctx, t.Selection.DirOrDot(), t.Environment)
			if err != nil {
				return nil, err
			}
			id = &render.Release{Environment: t.Environment, Cluster: c}
		}
		cluster, err := cl.For(ctx, id)
		if err != nil {
			return nil, err
		}
		d := &deployed{name: t.Name, namespace: t.Namespace, releaseID: t.ReleaseID, cluster: cluster, byName: true}
		return []*deployed{d}, d.discover(ctx, ghosts)
	}
	rels := rendered
	if rels == nil {
		// Identity is all status and delete need from the source; the full
		// render (most of the time, for a big release) only runs when the
		// ghost check has candidates to rule out.
		ropts := t.RenderOptions(ctx)
		ropts.IdentityOnly = true
		var err error
		if rels, err = render.Render(ctx, ropts); err != nil {
			return nil, err
		}
	}
	out := make([]*deployed, 0, len(rels))
	for _, r := range rels {
		cluster, err := cl.For(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", r.Name, err)
		}
		full := t.RenderOptions(ctx)
		full.Releases = []string{r.Key}
		d := &deployed{name: r.Name, namespace: r.Namespace, environment: r.Environment, releaseID: r.ReleaseID,
			moduleID: r.Module.ID, cluster: cluster, reach: r.Reach.Recorded(),
			renderObjects: func(ctx context.Context) ([]manifest.Resource, error) {
				objs := r
				if rendered == nil || r.Resources == nil {
					rels, err := render.Render(ctx, full)
					if err != nil {
						return nil, err
					}
					objs = rels[0]
				}
				// Ghosts are judged against identities as applied.
				if _, err := scope.Resolve(ctx, cluster.Mapper, objs); err != nil {
					return nil, err
				}
				return objs.Resources, nil
			}}
		if err := d.discover(ctx, ghosts); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (d *deployed) discover(ctx context.Context, ghosts bool) error {
	inv, err := inventory.Find(ctx, d.cluster.Clientset, d.namespace, d.name, d.releaseID)
	if err != nil {
		return fmt.Errorf("release %s in %s: %w", d.label(), d.namespace, err)
	}
	if inv != nil && d.byName {
		// Nothing but the Secret itself says what it records: anyone who
		// may create Secrets in the namespace could have written it.
		if err := inv.Verify(); err != nil {
			return fault.Wrap(fault.Validation, fmt.Errorf("release %s in %s: %w", d.label(), d.namespace, err))
		}
	}
	if inv != nil {
		d.inv = inv
		d.name, d.releaseID = inv.Release.Name, inv.Release.ReleaseID
		if d.environment == "" {
			d.environment = inv.Release.Environment
		}
		d.entries, d.outside = inv.LatestWithin(d.reach)
		d.strategy = discover.StrategyInventory
		if !ghosts {
			return nil
		}
	}
	objs, stats, err := discover.ByLabels(ctx, d.cluster, discover.Query{Namespace: d.namespace, ReleaseName: d.name, ReleaseID: d.releaseID}, discover.Options{})
	if err != nil {
		return fmt.Errorf("release %s in %s: %w", d.label(), d.namespace, err)
	}
	d.requests += stats.Requests
	if inv == nil {
		d.entries, d.strategy = discover.Entries(objs), stats.Strategy
		for _, u := range objs {
			if u.GetDeletionTimestamp() != nil {
				d.terminating = append(d.terminating, discover.EntryOf(u))
			}
		}
		return nil
	}
	candidates := discover.Ghosts(objs, idsOf(d.entries))
	if len(candidates) > 0 && d.renderObjects != nil {
		// Objects the render produces but the inventory does not record
		// yet are the next apply's, not ghosts.
		rendered, err := d.renderObjects(ctx)
		if err != nil {
			return fmt.Errorf("release %s: rendering to tell ghosts from pending objects: %w", d.name, err)
		}
		ids := make([]manifest.ID, len(rendered))
		for i, r := range rendered {
			ids[i] = r.ID()
		}
		candidates = discover.Ghosts(candidates, ids)
	}
	d.ghosts = discover.Entries(candidates)
	return nil
}

// label names the release for messages when only part of it is known.
func (d *deployed) label() string {
	if d.name != "" {
		return d.name
	}
	return "with id " + d.releaseID
}

func idsOf(es []inventory.Entry) []manifest.ID {
	out := make([]manifest.ID, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}
