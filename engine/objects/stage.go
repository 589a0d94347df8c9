package objects

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/workers"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func isCRD(id manifest.ID) bool {
	return id.Group == "apiextensions.k8s.io" && id.Kind == "CustomResourceDefinition"
}

func isNamespace(id manifest.ID) bool { return id.Group == "" && id.Kind == "Namespace" }

// ApplyOptions tune ApplyAll.
type ApplyOptions struct {
	// Live holds objects already read (nil value: known to be absent);
	// objects not in it are read before applying.
	Live map[manifest.ID]*unstructured.Unstructured
	// Progress is called once per object as it finishes, never
	// concurrently.
	Progress func(Result)
	// NewNamespaces are namespaces the caller creates for this apply: in a
	// dry run they do not exist, so objects in them are reported like
	// objects in a Namespace of rs.
	NewNamespaces []string
	// Planned holds a dry-run ApplyAll's results: objects it found
	// Unchanged are reported so without asking the server again.
	Planned map[manifest.ID]Result
}

// ApplyAll applies rs in stages: CRDs and Namespaces first, then (once
// every applied CRD is Established and its kind resolves) each remaining
// weight in ascending order. Objects within a stage are applied
// concurrently, at most Concurrency at a time. A stage with a failure is
// finished, then no later stage starts. Results are in the order of rs
// (objects never reached are absent); the error joins every failure.
func (c *Client) ApplyAll(ctx context.Context, rs []manifest.Resource, opts ApplyOptions) ([]Result, error) {
	var mu sync.Mutex
	report := func(r Result) {
		if opts.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		opts.Progress(r)
	}
	results := make([]*Result, len(rs))
	// CRDs this apply creates, by the group/kind they define: in a dry run
	// their custom resources cannot be checked by the server.
	defined := map[schema.GroupKind]bool{}
	// Namespaces this apply creates: in a dry run they do not come to
	// exist, so objects in them cannot be checked either.
	namespaces := map[string]bool{}
	var crds []string
	for _, r := range rs {
		switch id := r.ID(); {
		case isCRD(id):
			crds = append(crds, r.Object.GetName())
			if gk, ok := definedKind(r.Object); ok {
				defined[gk] = true
			}
		case isNamespace(id):
			namespaces[id.Name] = true
		}
	}
	for _, ns := range opts.NewNamespaces {
		namespaces[ns] = true
	}
	// Roles and ClusterRoles this apply creates: in a dry run they do not
	// come to exist, and the API server checks a binding against its role
	// (unless the applier may bind any role), so it cannot check those
	// bindings until the real apply has created the role a stage earlier.
	newRoles := map[manifest.ID]bool{}

	stages, first := stagesOf(rs)

	var errs []error
	for si, stage := range stages {
		g, gctx := workers.WithContext(ctx)
		g.SetLimit(c.opts.Concurrency)
		var emu sync.Mutex
		for _, i := range stage {
			g.Go(func() error {
				r := rs[i]
				var res Result
				if p, ok := opts.Planned[r.ID()]; ok && p.Action == manifest.Unchanged {
					res = p
				} else if c.opts.DryRun && defined[r.ID().GroupKind()] {
					res = c.dryRunPendingCR(gctx, r, opts.Live)
				} else {
					live, known := opts.Live[r.ID()]
					res = c.Apply(gctx, r, live, known)
					if c.opts.DryRun && res.Action == manifest.Failed && apierrors.IsNotFound(res.Err) {
						if namespaces[r.ID().Namespace] {
							res = Result{Change: manifest.Change{Ref: res.Ref, Action: manifest.Created,
								Reason: "its Namespace is created by this apply; the server cannot check it in a dry run"}}
						} else if role, ok := roleRef(r); ok && newRoles[role] {
							res = Result{Change: manifest.Change{Ref: res.Ref, Action: manifest.Created,
								Reason: "its role is created by this apply; the server checks the binding when it is applied"}}
							if live != nil {
								res.Action = manifest.Configured
							}
						}
					}
				}
				results[i] = &res
				if res.Err != nil {
					emu.Lock()
					errs = append(errs, res.Err)
					emu.Unlock()
				}
				report(res)
				return nil
			})
		}
		_ = g.Wait()
		for _, i := range stage {
			if res := results[i]; res != nil && res.Action == manifest.Created && isRole(res.ID()) {
				newRoles[res.ID()] = true
			}
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			break
		}
		if si == 0 && len(first) > 0 && len(crds) > 0 && !c.opts.DryRun {
			if err := c.WaitEstablished(ctx, crds); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	out := make([]Result, 0, len(rs))
	for _, r := range results {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, errors.Join(errs...)
}

// stagesOf splits rs into apply stages (indexes into rs): first the CRDs,
// Namespaces and ClusterRoles (what everything else may need, as
// fluxcd/pkg/ssa stages them), then one stage per StageOf value.
func stagesOf(rs []manifest.Resource) (stages [][]int, first []int) {
	byStage := map[int][]int{}
	for i, r := range rs {
		k := StageOf(r.ID())
		if k == firstStage {
			first = append(first, i)
			continue
		}
		byStage[k] = append(byStage[k], i)
	}
	if len(first) > 0 {
		stages = append(stages, first)
	}
	keys := make([]int, 0, len(byStage))
	for k := range byStage {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		stages = append(stages, byStage[k])
	}
	return stages, first
}

const firstStage = math.MinInt

// StageOf orders an object among the apply's stages: CRDs, Namespaces and
// ClusterRoles first, then by weight, a RoleBinding or ClusterRoleBinding
// after everything else of its weight (the Roles it may refer to).
func StageOf(id manifest.ID) int {
	if isCRD(id) || isNamespace(id) || (id.Group == rbacGroup && id.Kind == "ClusterRole") {
		return firstStage
	}
	k := 2 * manifest.Weight(id.GroupKind())
	if id.Group == rbacGroup && (id.Kind == "RoleBinding" || id.Kind == "ClusterRoleBinding") {
		k++
	}
	return k
}

const rbacGroup = "rbac.authorization.k8s.io"

func isRole(id manifest.ID) bool {
	return id.Group == rbacGroup && (id.Kind == "Role" || id.Kind == "ClusterRole")
}

// roleRef is the role a RoleBinding or ClusterRoleBinding refers to.
func roleRef(r manifest.Resource) (manifest.ID, bool) {
	id := r.ID()
	if id.Group != rbacGroup || (id.Kind != "RoleBinding" && id.Kind != "ClusterRoleBinding") {
		return manifest.ID{}, false
	}
	kind, _, _ := unstructured.NestedString(r.Object.Object, "roleRef", "kind")
	name, _, _ := unstructured.NestedString(r.Object.Object, "roleRef", "name")
	ref := manifest.ID{Group: rbacGroup, Kind: kind, Name: name}
	if kind == "Role" {
		ref.Namespace = id.Namespace
	}
	return ref, kind != "" && name != ""
}

// dryRunPendingCR reports a custom resource whose CRD this apply creates:
// if the kind is already served it is checked like any object, otherwise
// the server cannot judge it until the CRD exists.
func (c *Client) dryRunPendingCR(ctx context.Context, r manifest.Resource, liveKnown map[manifest.ID]*unstructured.Unstructured) Result {
	if _, err := c.Mapping(r.ID().GroupKind(), r.GVK().Version); err == nil {
		live, known := liveKnown[r.ID()]
		return c.Apply(ctx, r, live, known)
	}
	res := Result{Change: manifest.ChangeOf(r.ID(), r.GVK().Version, r.Component, manifest.Created)}
	res.Reason = "its CustomResourceDefinition is created by this apply; the server cannot check it in a dry run"
	return res
}

// definedKind returns the group and kind a CRD object defines.
func definedKind(crd *unstructured.Unstructured) (schema.GroupKind, bool) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}, group != "" && kind != ""
}

// WaitEstablished waits until every named CRD has condition Established
// and the kind it defines resolves through the RESTMapper, so custom
// resources of it can be applied next.
func (c *Client) WaitEstablished(ctx context.Context, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.WaitTimeout)
	defer cancel()
	ri := c.cluster.Dynamic.Resource(crdGVR)
	for _, name := range names {
		for {
			crd, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				return fmt.Errorf("wait for CustomResourceDefinition %s: %w", name, err)
			}
			if err == nil && established(crd) {
				gk, ok := definedKind(crd)
				if !ok {
					break
				}
				if _, err := c.Mapping(gk, ""); err == nil {
					break
				} else if !meta.IsNoMatchError(err) {
					return fmt.Errorf("wait for CustomResourceDefinition %s: %w", name, err)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CustomResourceDefinition %s is not Established after %s: %w", name, c.opts.WaitTimeout, ctx.Err())
			case <-time.After(pollInterval):
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
