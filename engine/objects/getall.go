package objects

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/workers"
)

// listMin is the smallest group of objects (one type, one namespace) that
// GetAll reads with a metadata-only LIST instead of a GET each. A first
// apply of a 1 000-object release would otherwise send 1 000 GETs that all
// come back 404; with the LIST it sends one request per type and
// namespace (a page per listPage objects) and a GET only for what exists.
const (
	listMin  = 4
	listPage = 500
)

// GetAll reads the live state of rs concurrently. The map has an entry for
// every object: nil when it does not exist, or when its kind is not served
// yet (a custom resource whose CRD this apply creates).
func (c *Client) GetAll(ctx context.Context, rs []manifest.Resource) (map[manifest.ID]*unstructured.Unstructured, error) {
	out := make(map[manifest.ID]*unstructured.Unstructured, len(rs))
	var mu sync.Mutex
	set := func(id manifest.ID, u *unstructured.Unstructured) {
		mu.Lock()
		out[id] = u
		mu.Unlock()
	}

	type groupKey struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	groups := map[groupKey][]manifest.Resource{}
	var order []groupKey
	var singles []manifest.Resource
	for _, r := range rs {
		m, err := c.Mapping(r.GVK().GroupKind(), r.GVK().Version)
		if meta.IsNoMatchError(err) {
			out[r.ID()] = nil
			continue
		}
		if err != nil {
			// Let the GET report it with the object's identity.
			singles = append(singles, r)
			continue
		}
		k := groupKey{gvr: m.Resource}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			k.namespace = r.Object.GetNamespace()
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}

	g, gctx := workers.WithContext(ctx)
	g.SetLimit(c.opts.Concurrency)
	getOne := func(ctx context.Context, r manifest.Resource) error {
		live, err := c.getLive(ctx, r)
		if err != nil {
			return err
		}
		set(r.ID(), live)
		return nil
	}
	for _, k := range order {
		members := groups[k]
		if len(members) < listMin {
			singles = append(singles, members...)
			continue
		}
		g.Go(func() error {
			names, err := c.listNames(gctx, k.gvr, k.namespace)
			if err != nil {
				return fmt.Errorf("list %s in %q: %w", k.gvr.Resource, k.namespace, err)
			}
			for _, r := range members {
				if !names[r.Object.GetName()] {
					set(r.ID(), nil)
					continue
				}
				// Rare (adoption, a release without inventory): the apply
				// compares against the whole object. Read here, not in a
				// new goroutine of g, which could wait forever for a slot
				// held by list goroutines like this one.
				if err := getOne(gctx, r); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for _, r := range singles {
		g.Go(func() error { return getOne(gctx, r) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// getLive reads r's live object: nil when it does not exist or its kind
// is not served yet.
func (c *Client) getLive(ctx context.Context, r manifest.Resource) (*unstructured.Unstructured, error) {
	id := r.ID()
	live, err := c.Get(ctx, r.GVK(), id.Namespace, id.Name)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	return live, nil
}

// listNames returns the names of every object of gvr in namespace (all
// namespaces' for a cluster-scoped kind), reading metadata only, a page at
// a time.
func (c *Client) listNames(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (map[string]bool, error) {
	names := map[string]bool{}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := c.cluster.Metadata.Resource(gvr).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, item := range list.Items {
			names[item.Name] = true
		}
		if list.Continue == "" {
			return names, nil
		}
		opts.Continue = list.Continue
	}
}
