package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// Unmoved is apply's fast path when nothing moved: rel carries only its
// identity (render.Options.IdentityOnly) and Fingerprint. When the
// inventory's latest change was rendered from the same inputs, records
// every object as applied, and every object is still as that apply left
// it (the recorded resourceVersion, or the recorded live hash), applying
// would change nothing: Unmoved reports every object unchanged and ok.
// Any doubt — no inventory, another fingerprint, an object gone, changed
// or being deleted, a kept stale object a prune would retry, an entry
// beyond the environment's reach — is !ok with
// nothing written, and the caller takes the full path.
//
// A change from another source (a new commit that did not touch this
// release) is still recorded as seen, under the release's lock, as a
// no-op apply records it: promotion gates read it.
func Unmoved(ctx context.Context, cl *kube.Cluster, rel *render.Release, opts Options) (*Result, bool, error) {
	start := time.Now()
	if rel.Fingerprint == "" || opts.PruneGhosts {
		return nil, false, nil
	}
	r := newRun(cl, rel, opts)
	prev, err := inventory.Read(ctx, cl.Clientset, r.invRelease())
	if err != nil || prev == nil {
		return nil, false, err
	}
	id, c, ok := prev.SameInputs(rel.Fingerprint)
	if !ok {
		return nil, false, nil
	}
	entries := c.Inventory.Entries
	if !rel.Reach.AllowsAll(entries) {
		return nil, false, nil // the full path says what it leaves alone
	}
	// Metadata first: an object still at its recorded version is told
	// untouched without its content.
	dopts := discover.Options{Workers: r.client.Options().Concurrency, ReleaseID: rel.ReleaseID, MetadataOnly: true}
	found, _, err := discover.FromInventory(ctx, cl, entries, dopts)
	if err != nil {
		return nil, false, fmt.Errorf("%s: reading the recorded objects: %w", r.where(), err)
	}
	if untouched, err := discover.Untouched(ctx, cl, found, dopts); err != nil || !untouched {
		if err != nil {
			err = fmt.Errorf("%s: reading the recorded objects: %w", r.where(), err)
		}
		return nil, false, err
	}
	if !sameSource(c.Source, opts.Source) && !opts.DryRun {
		if ok, err := r.recordSeen(ctx, id); !ok || err != nil {
			return nil, false, err
		}
	}
	r.res.ChangeID, r.res.ManifestDigest = id, c.ManifestDigest
	r.res.Inventory.Name, r.res.Inventory.Previous = prev.Name(), id
	r.res.Inventory.ChangeIDs = append([]string{}, prev.Index...)
	for _, e := range entries {
		o := objectOfEntry(e)
		o.Action = manifest.Unchanged
		r.res.Applied = append(r.res.Applied, o)
		r.res.Counts.Unchanged++
	}
	r.res.InputsIdentical = true
	r.res.Duration = time.Since(start)
	return r.res, true, nil
}

func sameSource(a, b *inventory.Source) bool {
	if a == nil || b == nil {
		return a == b || reflect.DeepEqual(a, &inventory.Source{}) || reflect.DeepEqual(b, &inventory.Source{})
	}
	return *a == *b
}

// recordSeen records the latest change again with this run's source,
// under the lock, if it is still the latest change with the same inputs.
func (r *run) recordSeen(ctx context.Context, id string) (bool, error) {
	if err := r.acquire(ctx); err != nil {
		return false, err
	}
	defer r.release(ctx)
	inv, err := inventory.Read(ctx, r.cl.Clientset, r.invRelease())
	if err != nil || inv == nil {
		return false, err
	}
	latest, c, ok := inv.Latest()
	if !ok || latest != id || c.Inputs != r.rel.Fingerprint {
		return false, nil // another run moved it: take the full path
	}
	seen := *c
	seen.Source = r.opts.Source
	inv.Record(id, seen, r.opts.now(), r.opts.MaxHistory)
	if err := r.stillLocked(); err != nil {
		return false, err
	}
	if err := inventory.Write(ctx, r.cl.Clientset, inv); err != nil {
		return false, fmt.Errorf("%s: %w", r.where(), err)
	}
	r.res.Inventory.Written = true
	return true, nil
}
