// Package objects is opm's resource manager (what fluxcd/pkg/ssa's
// ResourceManager is to Flux): it carries out per-object verbs against the
// API server:
// resolve a kind to a resource, get, server-side apply (skipping objects
// that would not change), delete, and wait for CRDs to be Established or
// for an object to be gone. ApplyAll applies a release's objects in
// weight stages with bounded concurrency. It is the applier, named for
// what its verbs act on one at a time; the whole apply of a release
// (checks, inventory, prune) is engine/reconcile.
//
// Why not github.com/fluxcd/pkg/ssa, the closest Go peer? It is good code
// and shaped this package, but it works through a controller-runtime
// client and brings its own ChangeSet and inventory model (object
// metadata without the component), which would sit beside the RFC 004
// inventory rather than serve it. We need things it does not expose: a
// progress event per object as it happens, the weight stages of the
// reference order (not only "cluster definitions first"), our own worker
// count and client rate limits, dry-run and pre-apply checks that report
// in our result types, and errors that name kind/namespace/name in our
// fault classes. That is a few hundred lines on client-go's dynamic
// client and RESTMapper, so we own them.
//
// What we took from ssa: dry-run apply first and compare with the live
// object (managedFields, resourceVersion, generation, creationTimestamp,
// uid and status ignored), and skip the write when they are equal, so an
// unchanged re-apply moves no resourceVersion; stage CRDs and Namespaces,
// then wait until CRDs are Established before custom resources; and on an
// immutable-field error, with force, delete, wait until the object is
// gone, and create it again.
package objects

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Defaults.
const (
	FieldManager       = "opm"
	DefaultConcurrency = 8
	DefaultWaitTimeout = 2 * time.Minute
	pollInterval       = 100 * time.Millisecond
)

// Options tune a Client.
type Options struct {
	// FieldManager is the server-side apply manager; FieldManager when empty.
	FieldManager string
	// Concurrency bounds parallel requests per stage; DefaultConcurrency when < 1.
	Concurrency int
	// DryRun sends every write with dryRun=All: nothing is persisted.
	DryRun bool
	// Force recreates objects whose immutable fields change.
	Force bool
	// RecreatePVCs lets Force recreate PersistentVolumeClaims too, which
	// deletes their data; without it they fail like any immutable change.
	RecreatePVCs bool
	// RecreateCRDs lets Force recreate CustomResourceDefinitions, which
	// deletes every custom resource of their kind.
	RecreateCRDs bool
	// WaitTimeout bounds waiting for CRDs and deletions; DefaultWaitTimeout when zero.
	WaitTimeout time.Duration
	// TakeOver are the field managers whose fields apply takes over
	// (ownership.go): exact names, or prefixes ending in "*";
	// DefaultTakeOver() when nil.
	TakeOver []string
	// ForceConflicts takes fields that managers outside TakeOver own with
	// other values; without it such an object fails with a *ConflictError.
	ForceConflicts bool
}

// Client runs the verbs against one cluster.
type Client struct {
	cluster *kube.Cluster
	opts    Options
}

// New returns a Client for cl.
func New(cl *kube.Cluster, opts Options) *Client {
	if opts.FieldManager == "" {
		opts.FieldManager = FieldManager
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	if opts.TakeOver == nil {
		opts.TakeOver = DefaultTakeOver()
	}
	return &Client{cluster: cl, opts: opts}
}

// Options returns the effective options.
func (c *Client) Options() Options { return c.opts }

// Result is the outcome for one object: the engine's one per-object
// change (its Version the API version used, its Reason why a skipped or
// failed object was, or a note; KeptBy the annotation that made
// DeleteOwned keep it) with what the write left behind.
type Result struct {
	manifest.Change
	// Err is set when Action is Failed.
	Err error
	// ResourceVersion is the object's resourceVersion after a real (not
	// dry-run) create or configure, or the live one when Unchanged (also in
	// a dry run: nothing was written, so the live version stands, and an
	// apply that reuses a planned Unchanged can record it); empty otherwise.
	ResourceVersion string
	// Live is the object as the server holds it with that resourceVersion
	// (what the apply returned, or the live object when Unchanged); nil
	// when ResourceVersion is empty.
	Live *unstructured.Unstructured
	// NotOurs is set when DeleteOwned kept an object that does not carry
	// the release's id.
	NotOurs bool
	// Forced are the conflicting fields of other managers taken with
	// ForceConflicts.
	Forced []Conflict
}

// Mapping resolves a kind to its resource through the cluster's
// RESTMapper. A kind the cached discovery does not know (a CRD created a
// moment ago) resets the mapper and is tried once more. An empty version
// asks for the server's preferred one.
func (c *Client) Mapping(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	var versions []string
	if version != "" {
		versions = []string{version}
	}
	m, err := c.cluster.Mapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		c.cluster.Mapper.Reset()
		m, err = c.cluster.Mapper.RESTMapping(gk, versions...)
	}
	if err != nil {
		gv := schema.GroupVersion{Group: gk.Group, Version: version}
		if meta.IsNoMatchError(err) {
			return nil, fault.Wrap(fault.NotFound, fmt.Errorf("the cluster serves no kind %s in %s: install its CustomResourceDefinition or check apiVersion: %w", gk.Kind, gv, err))
		}
		return nil, fmt.Errorf("resolve kind %s in %s: %w", gk.Kind, gv, err)
	}
	return m, nil
}

// resource returns the dynamic client for an object of gvk in namespace.
func (c *Client) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	m, err := c.Mapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			return nil, nil, fault.Validationf("%s is namespaced but the object has no metadata.namespace", gvk.Kind)
		}
		return c.cluster.Dynamic.Resource(m.Resource).Namespace(namespace), m, nil
	}
	return c.cluster.Dynamic.Resource(m.Resource), m, nil
}

// Get returns the live object; a missing object is an apierrors NotFound.
func (c *Client) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	ri, _, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

// immutableMessages are the wordings of immutable-field refusals:
// most validators and CEL's `self == oldSelf` rules with the customary
// message ("field is immutable", "Value is immutable", "is immutable after
// creation" for a claim's spec), Service cluster IPs ("may not change once
// set"), a binding's roleRef ("cannot change roleRef") and a StorageClass's
// provisioner, parameters and reclaim policy ("updates to parameters are
// forbidden").
var immutableMessages = [...]string{"is immutable", "immutable field", "may not change once set", "cannot change roleref"}

// forcing says whether an apply must force ownership, and which fields of
// managers outside the take-over set it takes (only with ForceConflicts).
type forcing struct {
	needed    bool
	conflicts []Conflict
}

// NotOursReason starts the reason of an object DeleteOwned kept.
const NotOursReason = "recorded but not ours: kept"
