package pipeline

import (
	"context"

	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/render"
)

// RepairOptions are the options of Repair.
type RepairOptions struct {
	Selection
	ClusterOptions
	Locking
	// DryRun reports what the rebuilt inventory would record, writing nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// RepairResult is what Repair returns.
type RepairResult struct {
	Releases []RepairedRelease `json:"releases"`
}

// RepairedRelease is one release's rebuilt inventory.
type RepairedRelease struct {
	Name        string     `json:"name"`
	Namespace   string     `json:"namespace"`
	Environment string     `json:"environment,omitempty"`
	ReleaseID   string     `json:"releaseId"`
	Cluster     ClusterRef `json:"cluster"`
	DryRun      bool       `json:"dryRun"`
	// Inventory is the rebuilt inventory Secret.
	Inventory InventoryRef `json:"inventory"`
	// Backup holds the replaced Secret's data; empty when there was none.
	Backup string `json:"backup,omitempty"`
	// WasCorrupt is why the old inventory could not be read, if it could not.
	WasCorrupt string `json:"wasCorrupt,omitempty"`
	// Rendered objects plus Discovered ones (carrying the release's id)
	// make the new inventory; Stale are those discovered and not rendered,
	// which the next apply prunes.
	Rendered   int            `json:"rendered"`
	Discovered int            `json:"discovered"`
	Stale      []ObjectChange `json:"stale"`
	Error      string         `json:"error,omitempty"`
}

// Repair rebuilds the selected releases' inventories from what carries
// each release's id on its cluster plus its current render, under the
// release lock, keeping the old Secret's data in a backup Secret. It is
// the way out of a corrupt inventory, which every other command refuses.
func Repair(ctx context.Context, opts RepairOptions) (*RepairResult, error) {
	if err := single(opts.Selection, "repair"); err != nil {
		return nil, err
	}
	rels, err := render.Render(ctx, opts.RenderOptions(ctx))
	if err != nil {
		return nil, err
	}
	cls := newClusters(ctx, opts.ClusterOptions)
	res := &RepairResult{Releases: []RepairedRelease{}}
	for _, rel := range rels {
		rr := RepairedRelease{Name: rel.Name, Namespace: rel.Namespace, Environment: rel.Environment, ReleaseID: rel.ReleaseID,
			DryRun: opts.DryRun, Stale: []ObjectChange{}}
		cl, _, err := cls.forRelease(ctx, rel)
		if err == nil {
			rr.Cluster = ClusterRef{Server: cl.Server, Context: cl.Context}
			var r *reconcile.RepairResult
			r, err = reconcile.Repair(ctx, cl, rel, reconcile.Options{DryRun: opts.DryRun, Lock: opts.Locking.options()})
			if r != nil {
				rr.Inventory, rr.Backup, rr.WasCorrupt = r.Inventory, r.Backup, r.WasCorrupt
				rr.Rendered, rr.Discovered, rr.Stale = r.Rendered, r.Discovered, r.Stale
			}
		}
		if err != nil {
			rr.Error = err.Error()
			res.Releases = append(res.Releases, rr)
			return res, err
		}
		res.Releases = append(res.Releases, rr)
	}
	return res, nil
}
