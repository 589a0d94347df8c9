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
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

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

	var mu sync.Mutex
	if opts.ReleaseID != "" {
		var err error
		if todo, err = listBatches(ctx, cl, entries, mappings, todo, found, opts, &stats, &mu); err != nil {
			return nil, stats, err
		}
	}

	errs := make([]error, len(entries))
	run(ctx, opts.workers(), len(todo), func(ctx context.Context, k int) bool {
		i := todo[k]
		e := entries[i]
		m := mappings[e.ID.GroupKind()]
		ri := cl.Dynamic.Resource(m.Resource)
		var obj *unstructured.Unstructured
		var err error
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			obj, err = ri.Namespace(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
		} else {
			obj, err = ri.Get(ctx, e.Name, metav1.GetOptions{})
		}
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
			found[i].Object = obj
		}
		return true
	})
	if err := firstError(ctx, errs); err != nil {
		return nil, stats, err
	}
	return found, stats, nil
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

type batch struct {
	m   *meta.RESTMapping
	ns  string
	idx []int
}

// listBatches fetches big groups of todo entries with one LIST each by the
// release-id label, fills found, and returns the entries still to GET.
func listBatches(ctx context.Context, cl *kube.Cluster, entries []inventory.Entry, mappings map[schema.GroupKind]*meta.RESTMapping,
	todo []int, found []Found, opts Options, stats *Stats, mu *sync.Mutex) ([]int, error) {
	type key struct {
		gk schema.GroupKind
		ns string
	}
	groups := map[key]*batch{}
	var order []key
	for _, i := range todo {
		e := entries[i]
		k := key{e.ID.GroupKind(), e.Namespace}
		if groups[k] == nil {
			groups[k] = &batch{m: mappings[k.gk], ns: e.Namespace}
			order = append(order, k)
		}
		groups[k].idx = append(groups[k].idx, i)
	}
	var batches []*batch
	var rest []int
	for _, k := range order {
		if b := groups[k]; len(b.idx) >= batchMin {
			batches = append(batches, b)
		} else {
			rest = append(rest, b.idx...)
		}
	}
	selector := labels.Set{manifest.LabelReleaseUUID: opts.ReleaseID}.String()
	errs := make([]error, len(batches))
	retry := make([][]int, len(batches))
	run(ctx, opts.workers(), len(batches), func(ctx context.Context, k int) bool {
		b := batches[k]
		ri := dynamic.ResourceInterface(cl.Dynamic.Resource(b.m.Resource))
		if b.m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = cl.Dynamic.Resource(b.m.Resource).Namespace(b.ns)
		}
		byName := map[string]*unstructured.Unstructured{}
		cont := ""
		for {
			list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 500, Continue: cont})
			mu.Lock()
			stats.Requests++
			mu.Unlock()
			if err != nil {
				errs[k] = fmt.Errorf("list %s in %q with %s: %w", b.m.Resource, b.ns, selector, err)
				return false
			}
			for j := range list.Items {
				byName[list.Items[j].GetName()] = &list.Items[j]
			}
			if cont = list.GetContinue(); cont == "" {
				break
			}
		}
		for _, i := range b.idx {
			if obj := byName[entries[i].Name]; obj != nil {
				found[i].Object = obj
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
