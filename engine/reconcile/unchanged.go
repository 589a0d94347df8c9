package reconcile

import (
	"context"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/objects"
)

// splitUnchanged reads every rendered object the previous change recorded
// with batched LISTs (discover.FromInventory by release id), metadata
// first, and sets apart those provably unchanged since that apply
// (inventory.UnchangedSinceApplied): they need no request at all. An
// object still at its recorded version is told by its metadata; the
// others are read whole, to be told by their content or applied. The rest
// are returned to be applied; what was read for them goes into live so
// the apply skips its GET.
func (r *run) splitUnchanged(ctx context.Context, prevEntries []inventory.Entry, live map[manifest.ID]*unstructured.Unstructured) (unchanged map[manifest.ID]objects.Result, apply []manifest.Resource, err error) {
	applied := inventory.AppliedByID(prevEntries)
	var recorded []manifest.Resource
	for _, res := range r.rel.Resources {
		if applied[res.ID()] != nil {
			recorded = append(recorded, res)
		}
	}
	if len(recorded) == 0 {
		return nil, r.rel.Resources, nil
	}
	opts := discover.Options{Workers: r.client.Options().Concurrency, ReleaseID: r.rel.ReleaseID, MetadataOnly: true}
	found, _, err := discover.FromInventory(ctx, r.cl, inventory.Entries(recorded), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading the recorded objects: %w", r.where(), err)
	}
	unchanged = make(map[manifest.ID]objects.Result, len(recorded))
	var whole []int
	for i, res := range recorded {
		f, id := found[i], res.ID()
		if f.Partial && inventory.UnchangedByVersion(applied[id], res, f.Object) {
			// Not read whole: its record's live hash is carried over
			// (appliedEntries).
			unchanged[id] = objects.Result{Change: manifest.ChangeOf(id, res.GVK().Version, res.Component, manifest.Unchanged), ResourceVersion: f.Object.GetResourceVersion()}
			continue
		}
		if f.Object != nil {
			whole = append(whole, i)
		}
	}
	if len(whole) > 0 {
		if err := discover.Whole(ctx, r.cl, found, whole, opts); err != nil {
			return nil, nil, fmt.Errorf("%s: reading the recorded objects: %w", r.where(), err)
		}
	}
	for _, i := range whole {
		obj, res := found[i].Object, recorded[i]
		id := res.ID()
		if inventory.UnchangedSinceApplied(applied[id], res, obj) {
			unchanged[id] = objects.Result{Change: manifest.ChangeOf(id, res.GVK().Version, res.Component, manifest.Unchanged), ResourceVersion: obj.GetResourceVersion(), Live: obj}
			continue
		}
		// Discovery reads the server's preferred version; only an object
		// read at the rendered version can stand in for the apply's GET.
		if obj != nil && obj.GetAPIVersion() == res.Object.GetAPIVersion() {
			live[id] = obj
		}
	}
	for _, res := range r.rel.Resources {
		if _, ok := unchanged[res.ID()]; !ok {
			apply = append(apply, res)
		}
	}
	return unchanged, apply, nil
}

// mergeUnchanged puts the objects splitUnchanged set apart back among the
// apply's results, in render order. After a failed apply only the stages
// it reached are reported, as before: an unchanged object in a later
// stage than every result is left out.
func (r *run) mergeUnchanged(results []objects.Result, unchanged map[manifest.ID]objects.Result, emitted map[manifest.ID]bool, failed bool) []objects.Result {
	if len(unchanged) == 0 {
		return results
	}
	reached := math.MaxInt
	if failed {
		reached = math.MinInt
		for _, res := range results {
			reached = max(reached, objects.StageOf(res.ID()))
		}
	}
	byID := make(map[manifest.ID]objects.Result, len(results)+len(unchanged))
	for _, res := range results {
		byID[res.ID()] = res
	}
	for _, res := range r.rel.Resources {
		if u, ok := unchanged[res.ID()]; ok && objects.StageOf(u.ID()) <= reached {
			byID[u.ID()] = u
			if !emitted[u.ID()] {
				r.emit(PhaseApply, objectOf(u))
			}
		}
	}
	out := make([]objects.Result, 0, len(byID))
	for _, res := range r.rel.Resources {
		if got, ok := byID[res.ID()]; ok {
			out = append(out, got)
		}
	}
	return out
}

// appliedEntries is what the inventory records for the rendered objects:
// their entries with the state each has after this apply. An object
// reported without its live content at the version prev records (told
// unchanged by its metadata) keeps prev's live hash.
func appliedEntries(rs []manifest.Resource, results []objects.Result, prev []inventory.Entry) ([]inventory.Entry, error) {
	recorded := inventory.AppliedByID(prev)
	live := make(map[manifest.ID]inventory.LiveState, len(results))
	for _, res := range results {
		st := inventory.LiveState{RV: res.ResourceVersion, Object: res.Live}
		if e := recorded[res.ID()]; res.Live == nil && e != nil && res.ResourceVersion != "" && res.ResourceVersion == e.Applied.RV {
			st.LiveHash = e.Applied.Live
		}
		live[res.ID()] = st
	}
	return inventory.WithApplied(rs, live)
}

// sortedWith returns results and the unchanged objects together in render
// order, without reporting anything.
func (r *run) sortedWith(results []objects.Result, unchanged map[manifest.ID]objects.Result) []objects.Result {
	byID := make(map[manifest.ID]objects.Result, len(results)+len(unchanged))
	for id, res := range unchanged {
		byID[id] = res
	}
	for _, res := range results {
		byID[res.ID()] = res
	}
	out := make([]objects.Result, 0, len(byID))
	for _, res := range r.rel.Resources {
		if got, ok := byID[res.ID()]; ok {
			out = append(out, got)
		}
	}
	return out
}

// emitUnchangedBefore reports, before the applied object id, every object
// set apart as unchanged that comes earlier in render order and was not
// reported yet, so progress output keeps the order of an apply without the
// skip. emitted records what was reported.
func (r *run) emitUnchangedBefore(unchanged map[manifest.ID]objects.Result, emitted map[manifest.ID]bool, id manifest.ID) {
	if len(unchanged) == 0 {
		return
	}
	for _, res := range r.rel.Resources {
		rid := res.ID()
		if rid == id {
			return
		}
		if u, ok := unchanged[rid]; ok && !emitted[rid] {
			emitted[rid] = true
			r.emit(PhaseApply, objectOf(u))
		}
	}
}
