package pipeline

import (
	"cmp"
	"context"
	"fmt"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/render"
)

// HistoryOptions are the options of History.
type HistoryOptions struct {
	Target
	ClusterOptions
}

// HistoryResult is what History returns; its JSON form is `opm history -o json`.
type HistoryResult struct {
	Releases []ReleaseHistory `json:"releases"`
}

// ReleaseHistory is the change history of one release's inventory.
type ReleaseHistory struct {
	Name        string     `json:"name"`
	Namespace   string     `json:"namespace"`
	Environment string     `json:"environment,omitempty"`
	ReleaseID   string     `json:"releaseId"`
	Inventory   string     `json:"inventory"`
	Cluster     ClusterRef `json:"cluster"`
	// Changes are newest first; the first is what the cluster runs.
	Changes []HistoryEntry `json:"changes"`
}

// HistoryEntry is one recorded change.
type HistoryEntry struct {
	ChangeID       string              `json:"changeId"`
	Current        bool                `json:"current"`
	Timestamp      string              `json:"timestamp"`
	ManifestDigest string              `json:"manifestDigest"`
	Objects        int                 `json:"objects"`
	Module         inventory.ModuleRef `json:"module"`
	// Source is where the change was last applied from; nil when it was
	// not recorded. Timestamp is when.
	Source *inventory.Source `json:"source,omitempty"`
	// First is when, from which commit, by whom and from which run the
	// change was first applied; a re-apply never moves it.
	First inventory.Sighting `json:"first"`
	// Seen are the other applies since the first (another commit, or a
	// return to the change after another one), newest first.
	Seen []inventory.Sighting `json:"seen,omitempty"`
	// ForcedFrom are the field managers whose conflicting fields the last
	// apply took because it was told to (--force-conflicts).
	ForcedFrom []string `json:"forcedFrom,omitempty"`
}

// History lists the changes recorded in the targeted releases'
// inventories, newest first. A release without an inventory is a
// not-found error: it was never applied, or its inventory was deleted.
//
// A fleet selection (a group, a comma list, or an environment name that
// is a group) lists each environment's releases in wave order.
func History(ctx context.Context, opts HistoryOptions) (*HistoryResult, error) {
	return routed(ctx, opts.Selection,
		func() (*HistoryResult, error) { return historyEnvironment(ctx, opts) },
		func(envs []FleetEnvironment) (*HistoryResult, error) { return historyFleet(ctx, opts, envs) })
}

// historyEnvironment is History in one environment (or none).
func historyEnvironment(ctx context.Context, opts HistoryOptions) (*HistoryResult, error) {
	found, err := findInventories(ctx, opts.Target, opts.ClusterOptions)
	if err != nil {
		return nil, err
	}
	res := &HistoryResult{Releases: make([]ReleaseHistory, 0, len(found))}
	for _, f := range found {
		inv := f.inv
		rh := ReleaseHistory{
			Name: inv.Release.Name, Namespace: inv.Namespace(), Environment: inv.Release.Environment, ReleaseID: inv.Release.ReleaseID,
			Inventory: inv.Name(), Cluster: ClusterRef{Server: f.cluster.Server, Context: f.cluster.Context},
			Changes: make([]HistoryEntry, 0, len(inv.Index)),
		}
		for i, id := range inv.Index {
			c := inv.Changes[id]
			rh.Changes = append(rh.Changes, HistoryEntry{ChangeID: id, Current: i == 0, Timestamp: c.Timestamp,
				ManifestDigest: c.ManifestDigest, Objects: len(c.Inventory.Entries), Module: c.Module, Source: c.Source,
				First: c.FirstApplied(), Seen: c.Seen, ForcedFrom: c.ForcedFrom})
		}
		res.Releases = append(res.Releases, rh)
	}
	return res, nil
}

// historyFleet lists the history of each environment of a fleet, in wave
// order; an environment where a release was never applied is skipped
// with the others still listed, and reported in the error.
func historyFleet(ctx context.Context, opts HistoryOptions, envs []FleetEnvironment) (*HistoryResult, error) {
	out := &HistoryResult{Releases: []ReleaseHistory{}}
	err := eachEnvironment(opts.Selection, envs, func(sel Selection) error {
		o := opts
		o.Selection = sel
		r, err := History(ctx, o)
		if r != nil {
			out.Releases = append(out.Releases, r.Releases...)
		}
		return err
	})
	if len(out.Releases) == 0 {
		return nil, err
	}
	return out, err
}

// foundInventory is a release's inventory and the cluster it is on.
type foundInventory struct {
	// rel is the release's identity as rendered now; nil when selected by name.
	rel     *render.Release
	cluster *kube.Cluster
	inv     *inventory.Inventory
}

// findInventories reads the inventory of every targeted release.
func findInventories(ctx context.Context, t Target, co ClusterOptions) ([]foundInventory, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	cl := newClusters(ctx, co)
	if t.ByName() {
		cluster, err := cl.For(ctx, &render.Release{})
		if err != nil {
			return nil, err
		}
		inv, err := inventory.Find(ctx, cluster.Clientset, t.Namespace, t.Name, t.ReleaseID)
		if err != nil {
			return nil, err
		}
		if inv == nil {
			return nil, fault.Wrap(fault.NotFound, fmt.Errorf("no inventory of release %s in namespace %s on %s: it was never applied there, or its inventory Secret was deleted",
				cmp.Or(t.Name, "with id "+t.ReleaseID), t.Namespace, cluster))
		}
		return []foundInventory{{cluster: cluster, inv: inv}}, nil
	}
	ropts := t.RenderOptions(ctx)
	ropts.IdentityOnly = true
	rels, err := render.Render(ctx, ropts)
	if err != nil {
		return nil, err
	}
	out := make([]foundInventory, 0, len(rels))
	for _, r := range rels {
		cluster, err := cl.For(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", r.Name, err)
		}
		inv, err := inventory.Read(ctx, cluster.Clientset, inventory.Release{Name: r.Name, Namespace: r.Namespace, ReleaseID: r.ReleaseID, Environment: r.Environment})
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", r.Name, err)
		}
		if inv == nil {
			return nil, fault.Wrap(fault.NotFound, fmt.Errorf("release %s has no inventory in namespace %s on %s: it was never applied there (environment %s), or its inventory Secret was deleted",
				r.Name, r.Namespace, cluster, cmp.Or(r.Environment, "-")))
		}
		out = append(out, foundInventory{rel: r, cluster: cluster, inv: inv})
	}
	return out, nil
}
