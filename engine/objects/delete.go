// Delete: deleting one object opm owns, and waiting for it to be gone.

package objects

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/manifest"
)

// WaitGone waits until the object is gone, or replaced by one with
// another UID; with an empty uid, until no object of that name exists.
func (c *Client) WaitGone(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	ri, _, err := c.resource(gvk, namespace)
	if err != nil {
		return err
	}
	return c.waitGone(ctx, ri, name, uid)
}

func (c *Client) waitGone(ctx context.Context, ri dynamic.ResourceInterface, name string, uid types.UID) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.WaitTimeout)
	defer cancel()
	for {
		o, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && uid != "" && o.GetUID() != uid) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("wait for %s to be deleted: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still exists after %s (finalizers %v): %w", name, c.opts.WaitTimeout, finalizers(o), ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

func finalizers(o *unstructured.Unstructured) []string {
	if o == nil {
		return nil
	}
	return o.GetFinalizers()
}

// KeptReason is the reason of an object kept by its annotation a.
func KeptReason(a string) string {
	return fmt.Sprintf("kept: its %s annotation is %q (remove the annotation to let prune delete it)", a, manifest.ResourcePolicyKeep)
}

// DeleteOwned deletes an object with background propagation and does not
// wait for finalizers, resolving its kind to the server's preferred
// version (RFC 004 edge case 6; a missing object or a kind no longer
// served counts as deleted, Reason "already gone"), but only if the live object
// carries releaseID in its module-release.opmodel.dev/uuid label:
// otherwise it is Skipped with NotOurs set. An object annotated to be kept
// (manifest.KeptBy) is Skipped with KeptBy set. An inventory is just a Secret,
// and whoever can write one must not be able to make a pipeline's
// credentials delete objects that are not the release's. The delete is
// conditional on the UID that was checked.
func (c *Client) DeleteOwned(ctx context.Context, id manifest.ID, releaseID string) (Result, error) {
	ri, res, served, err := c.forDelete(id)
	if !served || err != nil {
		return res, err
	}
	live, err := ri.Get(ctx, id.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		res.Reason = "already gone"
		return res, nil
	}
	if err != nil {
		return c.failed(res, fmt.Errorf("delete %s: get: %w", id, err))
	}
	if got := live.GetLabels()[manifest.LabelReleaseUUID]; got != releaseID {
		res.Action, res.NotOurs = manifest.Skipped, true
		res.Reason = fmt.Sprintf("%s (its %s label is %q, not this release's %s)", NotOursReason, manifest.LabelReleaseUUID, got, releaseID)
		return res, nil
	}
	if a := manifest.KeptBy(live.GetAnnotations()); a != "" {
		res.Action, res.KeptBy = manifest.Skipped, a
		res.Reason = KeptReason(a)
		return res, nil
	}
	uid := live.GetUID()
	return c.deleteNow(ctx, ri, res, &metav1.Preconditions{UID: &uid})
}

// forDelete resolves id's kind to the server's preferred version. served
// is false (and res already "already gone") when the kind is no longer
// served.
func (c *Client) forDelete(id manifest.ID) (ri dynamic.ResourceInterface, res Result, served bool, err error) {
	res = Result{Change: manifest.Change{Ref: manifest.RefOf(id, "", ""), Action: manifest.Deleted}}
	m, err := c.Mapping(id.GroupKind(), "")
	if meta.IsNoMatchError(err) {
		res.Reason = "already gone (its kind is no longer served)"
		return nil, res, false, nil
	}
	if err != nil {
		res, err = c.failed(res, fmt.Errorf("delete %s: %w", id, err))
		return nil, res, false, err
	}
	res.Version = m.GroupVersionKind.Version
	ri = c.cluster.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.cluster.Dynamic.Resource(m.Resource).Namespace(id.Namespace)
	}
	return ri, res, true, nil
}

// deleteNow sends the delete (background propagation, the client's dry
// run, optional preconditions); a missing object is already gone.
func (c *Client) deleteNow(ctx context.Context, ri dynamic.ResourceInterface, res Result, pre *metav1.Preconditions) (Result, error) {
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: pre}
	if c.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err := ri.Delete(ctx, res.ID().Name, opts)
	if apierrors.IsNotFound(err) {
		res.Reason = "already gone"
		return res, nil
	}
	if err != nil {
		return c.failed(res, fmt.Errorf("delete %s: %w", res.ID(), err))
	}
	return res, nil
}

func (c *Client) failed(res Result, err error) (Result, error) {
	res.Action, res.Err = manifest.Failed, err
	return res, err
}
