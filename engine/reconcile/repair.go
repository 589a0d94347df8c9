package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// RepairResult is what Repair did to one release's inventory.
type RepairResult struct {
	*Result
	// Backup names the Secret holding the replaced Secret's data; empty
	// when there was no Secret.
	Backup string `json:"backup,omitempty"`
	// WasCorrupt says why the old inventory could not be read; empty when
	// it decoded fine (it is rebuilt all the same).
	WasCorrupt string `json:"wasCorrupt,omitempty"`
	// Discovered counts objects found carrying the release's id;
	// Rendered the objects of the current render.
	Discovered int `json:"discovered"`
	Rendered   int `json:"rendered"`
}

// Repair rebuilds rel's inventory under the release lock: what carries the
// release's id on the cluster (a label scan) plus what rel renders, as one
// change with rel's change ID. The old Secret's data is first copied into
// a backup Secret. Objects found but no longer rendered are then stale, so
// the next apply prunes them (after its ownership check). A dry run reads
// and reports, and writes nothing.
func Repair(ctx context.Context, cl *kube.Cluster, rel *render.Release, opts Options) (*RepairResult, error) {
	start := time.Now()
	r := newRun(cl, rel, opts)
	out := &RepairResult{Result: r.res, Rendered: len(rel.Resources)}
	defer func() { r.res.Duration = time.Since(start) }()
	if err := r.acquire(ctx); err != nil {
		return out, err
	}
	defer r.release(ctx)

	old, err := inventory.Raw(ctx, cl.Clientset, r.invRelease())
	if err != nil {
		return out, fmt.Errorf("%s: %w", r.where(), err)
	}
	if old != nil {
		if _, err := inventory.Decode(old); err != nil {
			out.WasCorrupt = err.Error()
		}
	}
	objs, _, err := discover.ByLabels(ctx, cl, discover.Query{Namespace: rel.Namespace, ReleaseID: rel.ReleaseID}, discover.Options{})
	if err != nil {
		return out, fmt.Errorf("%s: finding the objects that carry its id: %w", r.where(), err)
	}
	entries := inventory.Entries(rel.Resources)
	have := map[manifest.ID]bool{}
	for _, e := range entries {
		have[e.ID] = true
	}
	for _, u := range objs {
		if u.GetLabels()[manifest.LabelReleaseUUID] != rel.ReleaseID {
			continue // found by name only: not provably this release's
		}
		out.Discovered++
		if e := discover.EntryOf(u); !have[e.ID] {
			have[e.ID] = true
			entries = append(entries, e)
			r.res.Stale = append(r.res.Stale, objectOfEntry(e))
		}
	}
	r.res.Counts.Stale = len(r.res.Stale)

	inv := inventory.Rebuilt(r.invRelease(), old)
	inv.Record(rel.ChangeID, r.change(entries), opts.now(), opts.MaxHistory)
	r.res.Inventory.Name = inv.Name()
	r.res.Inventory.ChangeIDs = slices.Clone(inv.Index)
	if opts.DryRun {
		return out, nil
	}
	if old != nil {
		b, err := inventory.Backup(ctx, cl.Clientset, old, opts.now())
		if err != nil {
			return out, fmt.Errorf("%s: %w; the inventory was not touched", r.where(), err)
		}
		out.Backup = b.Name
	}
	if err := r.stillLocked(); err != nil {
		return out, fmt.Errorf("%s: the inventory was not written: %w", r.where(), err)
	}
	if err := inventory.Write(ctx, cl.Clientset, inv); err != nil {
		return out, fmt.Errorf("%s: %w", r.where(), err)
	}
	r.res.Inventory.Written = true
	return out, nil
}
