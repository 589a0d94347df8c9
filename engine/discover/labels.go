package discover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Query names the release a label scan looks for.
type Query struct {
	// Namespace is the release's namespace, where namespaced types are
	// listed. Required.
	Namespace string
	// ReleaseName selects by managed-by and release name: what objects
	// applied before release identities existed carry.
	ReleaseName string
	// ReleaseID selects by the release's identity label.
	ReleaseID string
}

// pageSize keeps each list response bounded on large clusters.
const pageSize = 500

// listTarget is one resource type to list.
type listTarget struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// ByLabels finds a release's objects without an inventory: it lists every
// listable resource type the server serves (its preferred version of each
// group; subresources, Endpoints and EndpointSlices skipped) with the
// release-id selector and, separately, the name selector (of what does not
// carry this release's id: the first selector finds that), namespaced types
// in q.Namespace and cluster-scoped types cluster-wide, Options.Workers
// lists at a time. The results are unioned and deduplicated by metadata.uid
// and returned in apply order.
//
// An object found by the name selector whose release-id label names another
// release is left out: it belongs to a release of the same name in another
// namespace (which shares cluster-scoped types with this one).
//
// API groups whose discovery fails (an aggregated API that is down) and
// types the credentials may not list are skipped and named in
// Stats.Skipped, rather than failing the whole scan.
func ByLabels(ctx context.Context, cl *kube.Cluster, q Query, opts Options) ([]*unstructured.Unstructured, Stats, error) {
	stats := Stats{Strategy: StrategyLabels}
	selectors, err := q.selectors()
	if err != nil {
		return nil, stats, err
	}

	targets, skipped, err := listTargets(cl)
	if err != nil {
		return nil, stats, err
	}
	stats.Types = len(targets)
	stats.Skipped = skipped

	type task struct {
		target   listTarget
		selector string
		byName   bool
	}
	var tasks []task
	for _, t := range targets {
		for _, s := range selectors {
			tasks = append(tasks, task{target: t, selector: s.selector, byName: s.byName})
		}
	}

	results := make([][]unstructured.Unstructured, len(tasks))
	errs := make([]error, len(tasks))
	var mu sync.Mutex
	run(ctx, opts.workers(), len(tasks), func(ctx context.Context, i int) bool {
		t := tasks[i]
		lister := list
		if opts.MetadataOnly {
			lister = listMetadata
		}
		items, requests, err := lister(ctx, cl, t.target, q.Namespace, t.selector)
		mu.Lock()
		defer mu.Unlock()
		stats.Requests += requests
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			// The type went away since discovery, or does not really
			// list: nothing of the release can be there.
		case apierrors.IsForbidden(err):
			stats.Skipped = append(stats.Skipped, fmt.Sprintf("%s: list forbidden", t.target.gvr.GroupResource()))
		case err != nil:
			errs[i] = fmt.Errorf("list %s with selector %q: %w", t.target.gvr.GroupResource(), t.selector, err)
			return false
		default:
			if t.byName && q.ReleaseID != "" {
				items = slices.DeleteFunc(items, func(u unstructured.Unstructured) bool {
					id := u.GetLabels()[manifest.LabelReleaseUUID]
					return id != "" && id != q.ReleaseID
				})
			}
			results[i] = items
		}
		return true
	})
	if err := firstError(ctx, errs); err != nil {
		return nil, stats, err
	}
	slices.Sort(stats.Skipped)

	seen := make(map[types.UID]bool)
	var out []*unstructured.Unstructured
	for i, items := range results {
		for j := range items {
			u := &items[j]
			if u.GetKind() == "" {
				// List items normally carry their kind; set it when not, so
				// the caller can always tell what it got.
				u.SetGroupVersionKind(tasks[i].target.gvr.GroupVersion().WithKind(tasks[i].target.kind))
			}
			if excluded(u) || seen[u.GetUID()] {
				continue
			}
			seen[u.GetUID()] = true
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return manifest.CompareIDs(IDOf(a), IDOf(b)) })
	return out, stats, nil
}

type labelSelector struct {
	selector string
	byName   bool
}

// selectors builds the two selectors, each excluding the inventory Secret
// server-side. Label values are validated so a bad name is a clear error,
// not a 400 from every list.
func (q Query) selectors() ([]labelSelector, error) {
	if q.Namespace == "" {
		return nil, fault.Validationf("label discovery needs the release namespace")
	}
	if q.ReleaseName == "" && q.ReleaseID == "" {
		return nil, fault.Validationf("label discovery needs a release name or a release id (namespace %s)", q.Namespace)
	}
	notInventory, err := labels.NewRequirement(inventory.LabelComponent, selection.NotEquals, []string{inventory.ComponentInventory})
	if err != nil {
		return nil, fmt.Errorf("build inventory exclusion selector: %w", err)
	}
	var out []labelSelector
	if q.ReleaseID != "" {
		sel, err := labels.ValidatedSelectorFromSet(labels.Set{manifest.LabelReleaseUUID: q.ReleaseID})
		if err != nil {
			return nil, fault.Validationf("release id %q is not a valid label value: %v", q.ReleaseID, err)
		}
		out = append(out, labelSelector{selector: sel.Add(*notInventory).String()})
	}
	if q.ReleaseName != "" {
		sel, err := labels.ValidatedSelectorFromSet(labels.Set{manifest.LabelManagedBy: manifest.ManagedByOPM, manifest.LabelReleaseName: q.ReleaseName})
		if err != nil {
			return nil, fault.Validationf("release name %q is not a valid label value: %v", q.ReleaseName, err)
		}
		sel = sel.Add(*notInventory)
		if q.ReleaseID != "" {
			// What carries the id is the first selector's: the server
			// leaves it out here rather than sending it twice (a
			// release's workloads make as many objects again, all
			// labelled).
			notID, err := labels.NewRequirement(manifest.LabelReleaseUUID, selection.NotIn, []string{q.ReleaseID})
			if err != nil {
				return nil, fmt.Errorf("build release id exclusion selector: %w", err)
			}
			sel = sel.Add(*notID)
		}
		out = append(out, labelSelector{selector: sel.String(), byName: true})
	}
	return out, nil
}

// listTargets returns the listable resource types at their groups'
// preferred versions, and the API groups that could not be discovered.
func listTargets(cl *kube.Cluster) ([]listTarget, []string, error) {
	lists, err := cl.Discovery.ServerPreferredResources()
	var skipped []string
	if err != nil {
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			err = fmt.Errorf("discover the cluster's resource types: %w", err)
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return nil, nil, err // keeps its permission class
			}
			return nil, nil, fault.Wrap(fault.Connectivity, err)
		}
		for gv, gerr := range failed.Groups {
			skipped = append(skipped, fmt.Sprintf("%s: discovery failed: %v", gv, gerr))
		}
	}
	var targets []listTarget
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, nil, fmt.Errorf("discover the cluster's resource types: group version %q: %w", l.GroupVersion, err)
		}
		for _, r := range l.APIResources {
			switch {
			case strings.Contains(r.Name, "/"): // subresource
			case !slices.Contains(r.Verbs, "list"):
			case excludedKind(gv.WithKind(r.Kind).GroupKind()):
			case gv.Group == "" && r.Name == "componentstatuses":
				// Deprecated; listing it probes the control plane and makes
				// the server send a warning.
			default:
				targets = append(targets, listTarget{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced})
			}
		}
	}
	return targets, skipped, nil
}

// list lists one type with a label selector, every page of it.
func list(ctx context.Context, cl *kube.Cluster, t listTarget, namespace, selector string) ([]unstructured.Unstructured, int, error) {
	ri := cl.Dynamic.Resource(t.gvr)
	return pages(selector, func(opts metav1.ListOptions) ([]unstructured.Unstructured, string, error) {
		var l *unstructured.UnstructuredList
		var err error
		if t.namespaced {
			l, err = ri.Namespace(namespace).List(ctx, opts)
		} else {
			l, err = ri.List(ctx, opts)
		}
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.GetContinue(), nil
	})
}

// listMetadata is list for metadata only: each item an object of the
// listed type with its metadata and nothing else.
func listMetadata(ctx context.Context, cl *kube.Cluster, t listTarget, namespace, selector string) ([]unstructured.Unstructured, int, error) {
	ri := cl.Metadata.Resource(t.gvr)
	gvk := t.gvr.GroupVersion().WithKind(t.kind)
	return pages(selector, func(opts metav1.ListOptions) ([]unstructured.Unstructured, string, error) {
		var l *metav1.PartialObjectMetadataList
		var err error
		if t.namespaced {
			l, err = ri.Namespace(namespace).List(ctx, opts)
		} else {
			l, err = ri.List(ctx, opts)
		}
		if err != nil {
			return nil, "", err
		}
		items := make([]unstructured.Unstructured, 0, len(l.Items))
		for i := range l.Items {
			u, err := partial(gvk, &l.Items[i].ObjectMeta)
			if err != nil {
				return nil, "", err
			}
			items = append(items, *u)
		}
		return items, l.Continue, nil
	})
}

// pages runs one LIST page by page (pageSize items each, bounded on large
// clusters): page gets the options of each and returns its items and the
// continue token. It counts the requests sent.
func pages(selector string, page func(metav1.ListOptions) ([]unstructured.Unstructured, string, error)) ([]unstructured.Unstructured, int, error) {
	var items []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: pageSize}
	for requests := 1; ; requests++ {
		got, cont, err := page(opts)
		if err != nil {
			return nil, requests, err
		}
		items = append(items, got...)
		if opts.Continue = cont; cont == "" {
			return items, requests, nil
		}
	}
}

// Fetch reads the whole of an object a metadata-only scan found, at the
// version it was listed at; nil when it is gone since. It is a LIST of
// the object's type narrowed to its name (a field selector), never a GET,
// so it needs no right the scan did not: an identity that may list a kind
// but get only the objects it manages (what opm rbac grants for Secrets)
// still reads a ghost.
func Fetch(ctx context.Context, cl *kube.Cluster, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", IDOf(u), err)
	}
	ri := cl.Dynamic.Resource(m.Resource)
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", u.GetName()).String()}
	var l *unstructured.UnstructuredList
	if u.GetNamespace() != "" {
		l, err = ri.Namespace(u.GetNamespace()).List(ctx, opts)
	} else {
		l, err = ri.List(ctx, opts)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("list %s (%s): %w", IDOf(u), m.Resource, err)
	case len(l.Items) == 0:
		return nil, nil
	}
	return &l.Items[0], nil
}
