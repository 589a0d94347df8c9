package discover

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
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

// FromInventory fetches the objects an inventory recorded: one GET per
// entry, concurrently (Options.Workers at a time), never a scan. An object
// that is gone is a Found with Missing set, not an error. The result is in
// entry order; Stats.Requests is the number of GETs.
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
		m := mappings[e.ID().GroupKind()]
		if m == nil {
			found[i].Missing = true
			continue
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace && e.Namespace == "" {
			return nil, stats, fault.Validationf("inventory entry %s is a namespaced kind without a namespace", e.ID())
		}
		todo = append(todo, i)
	}

	errs := make([]error, len(entries))
	var mu sync.Mutex
	run(ctx, opts.workers(), len(todo), func(ctx context.Context, k int) bool {
		i := todo[k]
		e := entries[i]
		m := mappings[e.ID().GroupKind()]
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
			errs[i] = fmt.Errorf("get %s (%s): %w", e.ID(), m.Resource, err)
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
		gk := e.ID().GroupKind()
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
				return nil, fault.Wrap(fault.Connectivity, fmt.Errorf("resolve kind %s of %s: %w", gk, e.ID(), derr))
			}
			out[gk] = nil
		case err != nil:
			return nil, fmt.Errorf("resolve kind %s of %s: %w", gk, e.ID(), err)
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

// run calls do for 0..n-1 on at most workers goroutines. do returning false
// stops the hand-out of further work: one failure already fails the call.
func run(ctx context.Context, workers, n int, do func(ctx context.Context, i int) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if !do(ctx, i) {
					cancel()
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
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
