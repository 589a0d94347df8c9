package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/change"
)

// DeleteOptions are the options of Delete.
type DeleteOptions struct {
	Target
	ClusterOptions
	// DryRun lists what would be deleted, deleting nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Wait waits until the deleted objects are gone.
	Wait bool `json:"wait,omitempty"`
	Protection
	Locking
	// Progress hears each object as it is deleted or skipped.
	Progress func(ProgressEvent) `json:"-"`
}

// DeleteResult is what Delete returns.
type DeleteResult struct {
	Releases []DeletedRelease `json:"releases"`
}

// DeletedRelease is what Delete did to one release.
type DeletedRelease struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	Environment string `json:"environment,omitempty"`
	ReleaseID   string `json:"releaseId"`
	// Discovery is "inventory" or "labels" (no inventory Secret).
	Discovery string     `json:"discovery"`
	Cluster   ClusterRef `json:"cluster"`
	DryRun    bool       `json:"dryRun"`
	// Objects are what was (or would be) deleted, in delete order.
	Objects []ObjectChange `json:"objects"`
	Deleted []ObjectChange `json:"deleted"`
	Skipped []ObjectChange `json:"skipped"`
	// Inventory says whether the Secret was deleted or, with objects kept,
	// rewritten; Name is empty when the release had none.
	Inventory InventoryRef `json:"inventory"`
	Warnings  []string     `json:"warnings,omitempty"`
	// NothingToDelete is set when neither an inventory nor labelled
	// objects were found: a second delete is a no-op.
	NothingToDelete bool `json:"nothingToDelete,omitempty"`
}

// Delete removes the targeted releases: their inventory's objects (or, with
// no inventory, what the label scan finds) in reverse weight order with
// apply's Namespace/PVC protection, then the inventory Secret.
//
// A fleet selection (a group, a comma list) deletes in each environment,
// in wave order; every environment is tried and the errors joined.
func Delete(ctx context.Context, opts DeleteOptions) (*DeleteResult, error) {
	return routed(ctx, opts.Selection,
		func() (*DeleteResult, error) { return deleteEnvironment(ctx, opts) },
		func(envs []FleetEnvironment) (*DeleteResult, error) { return deleteFleet(ctx, opts, envs) })
}

// deleteEnvironment is Delete in one environment (or none).
func deleteEnvironment(ctx context.Context, opts DeleteOptions) (*DeleteResult, error) {
	ds, err := resolve(ctx, opts.Target, opts.ClusterOptions, false)
	if err != nil {
		return nil, err
	}
	res := &DeleteResult{Releases: []DeletedRelease{}}
	var errs []error
	for _, d := range ds {
		dr := DeletedRelease{
			Name: d.name, Namespace: d.namespace, Environment: d.environment, ReleaseID: d.releaseID,
			Discovery: d.strategy, Cluster: ClusterRef{Server: d.cluster.Server, Context: d.cluster.Context}, DryRun: opts.DryRun,
			Objects: []ObjectChange{}, Deleted: []ObjectChange{}, Skipped: []ObjectChange{},
		}
		entries := d.entries
		if d.inv != nil {
			if w := inventory.OutsideWarning(d.inv.Name(), d.outside); w != "" {
				dr.Warnings = append(dr.Warnings, w)
			}
		}
		if len(d.terminating) > 0 {
			// Already being deleted: another delete would change nothing.
			gone := map[manifest.ID]bool{}
			for _, e := range d.terminating {
				gone[e.ID] = true
				dr.Warnings = append(dr.Warnings, fmt.Sprintf("%s is already being deleted (finalizers pending)", e.ID))
			}
			entries = slices.DeleteFunc(slices.Clone(entries), func(e inventory.Entry) bool { return gone[e.ID] })
		}
		if d.inv == nil && len(entries) == 0 {
			dr.NothingToDelete = true
			dr.Warnings = append(dr.Warnings, fmt.Sprintf("release %s has no inventory and no labelled objects left to delete in namespace %s: nothing to delete", d.label(), d.namespace))
			res.Releases = append(res.Releases, dr)
			continue
		}
		rel := &render.Release{Name: d.name, Namespace: d.namespace, ReleaseID: d.releaseID, Environment: d.environment}
		ro, flush := redactedProgress(ctx, reconcile.Options{DryRun: opts.DryRun, PruneNamespaces: opts.PruneNamespaces, PrunePVCs: opts.PrunePVCs, PruneCRDs: opts.PruneCRDs, Progress: opts.Progress, Lock: opts.Locking.options()}, rel)
		r, err := reconcile.Delete(ctx, d.cluster, rel, d.inv, entries, reconcile.DeleteOptions{
			Options: ro,
			Wait:    opts.Wait,
			Reach:   d.reach,
		})
		flush()
		if r != nil {
			dr.Objects, dr.Deleted, dr.Skipped, dr.Inventory, dr.Warnings = r.Stale, r.Pruned, r.Skipped, r.Inventory, append(dr.Warnings, r.Warnings...)
			for _, list := range [][]ObjectChange{dr.Objects, dr.Deleted, dr.Skipped} {
				change.HiddenLast(redact.From(ctx), list, func(o ObjectChange) string { return o.Name }, func(ObjectChange) string { return "" })
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		res.Releases = append(res.Releases, dr)
	}
	return res, errors.Join(errs...)
}

// Label names the release: its name, else its release id.
func (d DeletedRelease) Label() string {
	if d.Name != "" {
		return d.Name
	}
	return d.ReleaseID
}

func deleteFleet(ctx context.Context, opts DeleteOptions, envs []FleetEnvironment) (*DeleteResult, error) {
	out := &DeleteResult{Releases: []DeletedRelease{}}
	err := eachEnvironment(opts.Selection, envs, func(sel Selection) error {
		o := opts
		o.Selection = sel
		r, err := Delete(ctx, o)
		if r != nil {
			out.Releases = append(out.Releases, r.Releases...)
		}
		return err
	})
	return out, err
}
