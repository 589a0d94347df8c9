package discover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/workers"
)

// Found is one inventory entry and what the cluster has for it.
type Found struct {
	Entry inventory.Entry
	// Object is the live object, fetched at the server's preferred version;
	// nil when Missing.
	Object *unstructured.Unstructured
	// Missing is set when the object does not exist, including when the
	// cluster no longer serves its kind at all (a removed CRD): either way
	// there is nothing to show or delete.
	Missing bool
	// Partial is set when Object is the object's metadata only
	// (Options.MetadataOnly); Whole reads the rest.
	Partial bool
}

// FromInventory fetches the objects an inventory recorded, concurrently
// (Options.Workers requests at a time), never a scan. An object that is gone
// is a Found with Missing set, not an error. The result is in entry order;
// Stats.Requests counts the requests sent.
//
// With Options.ReleaseID set, entries of one type in one namespace that are
// at least batchMin strong are fetched with one LIST by the release-id
// label, and only what that LIST does not return (an object whose labels
// were stripped, or that is gone) gets its own GET: a 200-object release
// costs a handful of requests instead of 200, and precision is unchanged
// because every entry is still matched by name.
//
// With Options.MetadataOnly each object found is its metadata only
// (Found.Partial); Whole then reads chosen ones in full.
//
// Each kind is resolved through the RESTMapper without the recorded
// version, so the server's preferred version is used even when the
// recorded one is no longer served.
func FromInventory(ctx context.Context, cl *kube.Cluster, entries []inventory.Entry, opts Options) ([]Found, Stats, error) {
	stats := Stats{Strategy: StrategyInventory}
	found := make([]Found, len(entries))
	for i, e := range entries {
		found[i].Entry = e
	}

	mappings, err := resolveKinds(cl, entries)
	if err != nil {
		return nil, stats, err
	}

	var todo []int
	for i, e := range entries {
		m := mappings[e.ID.GroupKind()]
		if m == nil {
			found[i].Missing = true
			continue
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace && e.Namespace == "" {
			return nil, stats, fault.Validationf("inventory entry %s is a namespaced kind without a namespace", e.ID)
		}
		todo = append(todo, i)
	}

	selector := releaseSelector(opts.ReleaseID)
	batched := func(_ groupKey, idx []int) string {
		if opts.ReleaseID == "" || len(idx) < batchMin {
			return ""
		}
		return selector
	}
	if err := read(ctx, cl, entries, todo, found, mappings, opts, &stats, batched); err != nil {
		return nil, stats, err
	}
	return found, stats, nil
}

// Whole reads whole, in place, the objects of found at the indices at
// (those a FromInventory with MetadataOnly read as their metadata, found
// being all it returned). With Options.ReleaseID, batchMin or more wanted
// objects of one type in one namespace are read with one LIST: by the
// release id where they are at least half of found's objects there, else
// by the release id and their components' names — a diff that changed 50
// of a release's 500 ConfigMaps gets those 50 (and their components'
// others) in one response, not 500 objects nor 50 GETs, each of which
// costs the API server more than a listed object (it reads etcd). What a
// LIST misses gets a GET; an object gone since is Missing.
func Whole(ctx context.Context, cl *kube.Cluster, found []Found, at []int, opts Options) error {
	opts.MetadataOnly = false
	entries := make([]inventory.Entry, len(found))
	size := map[groupKey]int{}
	for i, f := range found {
		entries[i] = f.Entry
		size[groupKey{f.Entry.ID.GroupKind(), f.Entry.Namespace}]++
	}
	wanted := make([]inventory.Entry, len(at))
	for k, i := range at {
		wanted[k] = entries[i]
	}
	mappings, err := resolveKinds(cl, wanted)
	if err != nil {
		return err
	}
	var todo []int
	for _, i := range at {
		found[i].Object, found[i].Partial = nil, false
		if mappings[entries[i].ID.GroupKind()] == nil {
			found[i].Missing = true
			continue
		}
		todo = append(todo, i)
	}
	byRelease := releaseSelector(opts.ReleaseID)
	batched := func(k groupKey, idx []int) string {
		switch {
		case opts.ReleaseID == "" || len(idx) < batchMin:
			return ""
		case 2*len(idx) >= size[k]:
			return byRelease
		}
		return componentsSelector(opts.ReleaseID, entries, idx)
	}
	var stats Stats
	return read(ctx, cl, entries, todo, found, mappings, opts, &stats, batched)
}

// Untouched reports whether every object of found (FromInventory's
// result, read whole or as metadata, each Entry carrying its apply's
// record) is as the apply that recorded it left it (inventory.Untouched).
// Metadata tells by the recorded resourceVersion; an object whose version
// moved (a controller's status write moves it) is read whole, in place, and
// its content tells. Anything else that cannot be untouched — gone, being
// deleted, no record — is false before anything is read.
func Untouched(ctx context.Context, cl *kube.Cluster, found []Found, opts Options) (bool, error) {
	var moved []int
	for i, f := range found {
		switch {
		case inventory.SameVersion(f.Entry, f.Object):
		case f.Partial && inventory.HashMayTell(f.Entry, f.Object):
			moved = append(moved, i)
		case !inventory.Untouched(f.Entry, f.Object):
			return false, nil
		}
	}
	if len(moved) == 0 {
		return true, nil
	}
	if err := Whole(ctx, cl, found, moved, opts); err != nil {
		return false, err
	}
	for _, i := range moved {
		if !inventory.Untouched(found[i].Entry, found[i].Object) {
			return false, nil
		}
	}
	return true, nil
}

// read fills found for the entries at todo: each group (one type, one
// namespace) batched gives a label selector with one LIST by it, any
// entry that LIST misses and the rest with a GET each.
func read(ctx context.Context, cl *kube.Cluster, entries []inventory.Entry, todo []int, found []Found, mappings map[schema.GroupKind]*meta.RESTMapping,
	opts Options, stats *Stats, batched func(groupKey, []int) string) error {
	var mu sync.Mutex
	todo, err := listBatches(ctx, cl, entries, mappings, todo, found, opts, stats, &mu, batched)
	if err != nil {
		return err
	}
	errs := make([]error, len(entries))
	run(ctx, opts.workers(), len(todo), func(ctx context.Context, k int) bool {
		i := todo[k]
		e := entries[i]
		m := mappings[e.ID.GroupKind()]
		obj, err := get(ctx, cl, m, e.Namespace, e.Name, opts.MetadataOnly)
		mu.Lock()
		stats.Requests++
		mu.Unlock()
		switch {
		case apierrors.IsNotFound(err):
			found[i].Missing = true
		case err != nil:
			errs[i] = fmt.Errorf("get %s (%s): %w", e.ID, m.Resource, err)
			return false
		default:
			found[i].Object, found[i].Partial = obj, opts.MetadataOnly
		}
		return true
	})
	return firstError(ctx, errs)
}

// get reads one object, whole or (metadataOnly) its metadata.
func get(ctx context.Context, cl *kube.Cluster, m *meta.RESTMapping, namespace, name string, metadataOnly bool) (*unstructured.Unstructured, error) {
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		namespace = ""
	}
	if !metadataOnly {
		return cl.Dynamic.Resource(m.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	pom, err := cl.Metadata.Resource(m.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return partial(m.GroupVersionKind, &pom.ObjectMeta)
}

// resolveKinds maps each distinct group/kind of the entries to its
// preferred-version REST mapping, or to nil when the cluster does not serve
// the kind. A miss first resets the mapper once, because its cache may
// predate a CRD installed since.
func resolveKinds(cl *kube.Cluster, entries []inventory.Entry) (map[schema.GroupKind]*meta.RESTMapping, error) {
	out := make(map[schema.GroupKind]*meta.RESTMapping)
	reset := false
	for _, e := range entries {
		gk := e.ID.GroupKind()
		if _, done := out[gk]; done {
			continue
		}
		// No version given: the mapper answers with the preferred one.
		m, err := cl.Mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) && !reset {
			cl.Mapper.Reset()
			reset = true
			m, err = cl.Mapper.RESTMapping(gk)
		}
		switch {
		case meta.IsNoMatchError(err):
			// Only call the kind unserved when discovery of its group
			// worked; an unreachable aggregated API must not make its
			// objects look deleted.
			if derr := groupDiscoveryFailed(cl, gk.Group); derr != nil {
				return nil, fault.Wrap(fault.Connectivity, fmt.Errorf("resolve kind %s of %s: %w", gk, e.ID, derr))
			}
			out[gk] = nil
		case err != nil:
			return nil, fmt.Errorf("resolve kind %s of %s: %w", gk, e.ID, err)
		default:
			out[gk] = m
		}
	}
	return out, nil
}

// groupDiscoveryFailed returns the discovery error for group, if the last
// discovery of any of its versions failed.
func groupDiscoveryFailed(cl *kube.Cluster, group string) error {
	_, _, err := cl.Discovery.ServerGroupsAndResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) {
		return nil
	}
	for gv, gerr := range failed.Groups {
		if gv.Group == group {
			return fmt.Errorf("discovery of %s failed: %w", gv, gerr)
		}
	}
	return nil
}

// run calls do for 0..n-1 on at most workers goroutines (the shared
// pool, engine/workers). do returning false stops the hand-out of further
// work: one failure already fails the call.
func run(ctx context.Context, limit, n int, do func(ctx context.Context, i int) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers.Run(ctx, min(limit, n), n, func(i int) {
		if !do(ctx, i) {
			cancel()
		}
	})
}

// firstError returns the first real error in task order, ignoring the
// cancellations a failure causes in the tasks still running; when nothing
// failed but ctx ended, it returns ctx's error.
func firstError(ctx context.Context, errs []error) error {
	var cancelled error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			if cancelled == nil {
				cancelled = err
			}
			continue
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return cancelled
}

// batchMin is the smallest group of entries (one type, one namespace) that
// is fetched with a LIST instead of one GET each.
const batchMin = 4

// groupKey is one type in one namespace: what one LIST reads.
type groupKey struct {
	gk schema.GroupKind
	ns string
}

type batch struct {
	m        *meta.RESTMapping
	ns       string
	idx      []int
	selector string
}

// releaseSelector selects a release's objects by its id.
func releaseSelector(id string) string {
	return labels.Set{manifest.LabelReleaseUUID: id}.String()
}

// maxSelectedComponents bounds the names one selector lists: a URL of a
// few kilobytes passes every proxy in front of an API server.
const maxSelectedComponents = 100

// componentsSelector selects the objects of a release's components that
// the entries at idx belong to; the release's selector when they are more
// than maxSelectedComponents or a component name is no label value (never
// from a render).
func componentsSelector(id string, entries []inventory.Entry, idx []int) string {
	var names []string
	for _, i := range idx {
		names = append(names, entries[i].Component)
	}
	slices.Sort(names)
	if names = slices.Compact(names); len(names) > maxSelectedComponents {
		return releaseSelector(id)
	}
	in, err := labels.NewRequirement(manifest.LabelComponentName, selection.In, names)
	if err != nil {
		return releaseSelector(id)
	}
	release, err := labels.NewRequirement(manifest.LabelReleaseUUID, selection.Equals, []string{id})
	if err != nil {
		return releaseSelector(id)
	}
	return labels.NewSelector().Add(*release, *in).String()
}

// listBatches fetches each group of todo entries batched gives a selector
// with one LIST by it, fills found, and returns the entries still to GET.
func listBatches(ctx context.Context, cl *kube.Cluster, entries []inventory.Entry, mappings map[schema.GroupKind]*meta.RESTMapping,
	todo []int, found []Found, opts Options, stats *Stats, mu *sync.Mutex, batched func(groupKey, []int) string) ([]int, error) {
	groups := map[groupKey]*batch{}
	var order []groupKey
	for _, i := range todo {
		e := entries[i]
		k := groupKey{e.ID.GroupKind(), e.Namespace}
		if groups[k] == nil {
			groups[k] = &batch{m: mappings[k.gk], ns: e.Namespace}
			order = append(order, k)
		}
		groups[k].idx = append(groups[k].idx, i)
	}
	var batches []*batch
	var rest []int
	for _, k := range order {
		b := groups[k]
		if b.selector = batched(k, b.idx); b.selector == "" {
			rest = append(rest, b.idx...)
			continue
		}
		batches = append(batches, b)
	}
	errs := make([]error, len(batches))
	retry := make([][]int, len(batches))
	run(ctx, opts.workers(), len(batches), func(ctx context.Context, k int) bool {
		b := batches[k]
		t := listTarget{gvr: b.m.Resource, kind: b.m.GroupVersionKind.Kind, namespaced: b.m.Scope.Name() == meta.RESTScopeNameNamespace}
		lister := list
		if opts.MetadataOnly {
			lister = listMetadata
		}
		items, requests, err := lister(ctx, cl, t, b.ns, b.selector)
		mu.Lock()
		stats.Requests += requests
		mu.Unlock()
		if err != nil {
			errs[k] = fmt.Errorf("list %s in %q with %s: %w", b.m.Resource, b.ns, b.selector, err)
			return false
		}
		byName := make(map[string]*unstructured.Unstructured, len(items))
		for j := range items {
			byName[items[j].GetName()] = &items[j]
		}
		for _, i := range b.idx {
			if obj := byName[entries[i].Name]; obj != nil {
				found[i].Object, found[i].Partial = obj, opts.MetadataOnly
			} else {
				retry[k] = append(retry[k], i)
			}
		}
		return true
	})
	if err := firstError(ctx, errs); err != nil {
		return nil, err
	}
	for _, r := range retry {
		rest = append(rest, r...)
	}
	slices.Sort(rest)
	return rest, nil
}
