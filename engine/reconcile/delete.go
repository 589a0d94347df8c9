package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/render"
)

// DeleteOptions tune Delete.
type DeleteOptions struct {
	Options
	// Wait waits until every deleted object is gone (finalizers done).
	Wait bool
	// Reach bounds the entries of an inventory read again under the lock
	// (the environment's; nil: the caller verified the inventory).
	Reach *inventory.Reach
}

// Delete removes a release from cl: every entry (the inventory's latest
// change, or what discovery found when there is no inventory) in reverse
// weight order, with prune's protections (Namespaces and
// PersistentVolumeClaims only with their flags; a forbidden delete is a
// warning; 404 is done), then the inventory Secret last. When protected or
// failed objects remain, the inventory is rewritten with just them instead,
// so a later delete (with the flags) can finish the job. rel needs only
// its name, namespace, release id and environment; inv may be nil.
func Delete(ctx context.Context, cl *kube.Cluster, rel *render.Release, inv *inventory.Inventory, entries []inventory.Entry, opts DeleteOptions) (*Result, error) {
	start := time.Now()
	r := newRun(cl, rel, opts.Options)
	defer func() { r.res.Duration = time.Since(start) }()
	if err := r.acquire(ctx); err != nil {
		return r.res, err
	}
	defer r.release(ctx)
	if r.lk != nil && inv != nil {
		// inv was read before the lock: another run may have changed it.
		fresh, err := inventory.Read(ctx, cl.Clientset, inv.Release)
		if err != nil {
			return r.res, fmt.Errorf("%s: %w", r.where(), err)
		}
		if fresh == nil {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("the inventory Secret %s was deleted by another run while this one waited for the lock", inv.Name()))
			r.res.Inventory.Name = inv.Name()
			return r.res, nil
		}
		if fresh.ResourceVersion() != inv.ResourceVersion() {
			inv = fresh
			entries, _ = fresh.LatestWithin(opts.Reach)
		}
	}
	if inv != nil {
		r.res.Inventory.Name = inv.Name()
		r.res.Inventory.ChangeIDs = slices.Clone(inv.Index)
	} else {
		r.res.Inventory.Name = ""
	}
	targets := slices.Clone(entries)
	inventory.SortForDelete(targets)
	for _, e := range targets {
		r.res.Stale = append(r.res.Stale, objectOfEntry(e))
	}
	r.res.Counts.Stale = len(targets)

	kept, deleted, deleteErr := r.prune(ctx, targets)
	if opts.DryRun {
		return r.res, deleteErr
	}
	if opts.Wait {
		for _, e := range deleted {
			if err := r.client.WaitGone(ctx, e.ID.GroupKind().WithVersion(""), e.Namespace, e.Name, ""); err != nil {
				deleteErr = errors.Join(deleteErr, fmt.Errorf("waiting for %s to be gone: %w", e.ID, err))
			}
		}
	}
	if inv == nil {
		return r.res, deleteErr
	}
	if len(kept) == 0 {
		if err := inventory.Delete(ctx, cl.Clientset, inv); err != nil {
			return r.res, errors.Join(fmt.Errorf("%s: deleting the inventory Secret: %w", r.where(), err), deleteErr)
		}
		r.res.Inventory.Deleted = true
		return r.res, deleteErr
	}
	if err := inv.SetLatestEntries(kept, opts.now()); err != nil {
		return r.res, errors.Join(err, deleteErr)
	}
	if err := inventory.Write(ctx, cl.Clientset, inv); err != nil {
		return r.res, errors.Join(fmt.Errorf("%s: %w", r.where(), err), deleteErr)
	}
	r.res.Inventory.Written = true
	r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%d object(s) were kept, so the inventory Secret %s stays with just them", len(kept), inv.Name()))
	return r.res, deleteErr
}
