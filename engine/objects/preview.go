package objects

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Planned is what applying one object would do, changing nothing.
type Planned struct {
	// Live is the object as the cluster holds it; nil when absent.
	Live *unstructured.Unstructured
	// Object is the object as the server would store it after the apply.
	Object *unstructured.Unstructured
	// Ownership says what the apply changes about who owns the object's
	// fields ("" when nothing): a take-over of other tools' fields, or
	// fields opm stops declaring that stay because another manager owns them.
	Ownership string
	// TakesOwnership is set when the apply would write to move fields to
	// opm even if Object equals Live.
	TakesOwnership bool
}

// Preview reports what applying r would do, changing nothing: the live
// object and the object as the server would store it after the apply (a
// server-side dry run, so defaults, admission and merges are the
// server's). When the apply takes over fields other tools wrote, the
// fields it would then remove are removed from the dry run's result and
// the server defaults that again (a dry-run update), so the preview shows
// what the apply leaves. An object whose namespace or kind does not exist
// yet previews as its rendered form: applying would create it. An apply
// that would change immutable fields returns the live object and an
// *ImmutableError; one that would change fields another manager owns, a
// *ConflictError.
//
// live, when known is true, is the object as just read (nil: absent) and
// saves the GET, as for Apply.
func (c *Client) Preview(ctx context.Context, r manifest.Resource, live *unstructured.Unstructured, known bool) (Planned, error) {
	obj := manifest.NormalizeSecret(r.Object)
	id := r.ID()
	ri, _, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if fault.KindOf(err) == fault.NotFound {
		return Planned{Object: obj}, nil // a kind the release's own CRD will add
	}
	if err != nil {
		return Planned{}, fmt.Errorf("preview %s: %w", id, err)
	}
	if !known {
		live, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return Planned{}, fmt.Errorf("get %s: %w", id, err)
		}
	}
	if live == nil {
		planned, err := c.apply(ctx, ri, obj, true, true)
		if apierrors.IsNotFound(err) {
			return Planned{Object: obj}, nil // its namespace does not exist yet
		}
		if err != nil {
			return Planned{}, fmt.Errorf("preview %s (server dry run): %w", id, err)
		}
		return Planned{Object: planned}, nil
	}
	planned, _, err := c.dryRun(ctx, ri, id, obj)
	if fields, ok := immutableFields(err); ok {
		return Planned{Live: live}, &ImmutableError{ID: id, Fields: fields, Err: err}
	}
	if err != nil {
		return Planned{Live: live}, err
	}
	own, err := c.ownership(live, planned)
	if err != nil {
		return Planned{Live: live}, fmt.Errorf("preview %s: %w", id, err)
	}
	p := Planned{Live: live, Object: planned, Ownership: own.reason(true), TakesOwnership: !own.none()}
	if removed := own.fields.removed(own.takeOver); !removed.Empty() {
		if p.Object, err = c.withoutRemoved(ctx, ri, live, planned, removed); err != nil {
			return p, fmt.Errorf("preview %s: %w", id, err)
		}
	}
	if kept := own.fields.keptByOthers(); kept != "" {
		p.Ownership = joinNote(p.Ownership, kept)
	}
	return p, nil
}

// withoutRemoved is planned without the removed fields, as the server
// would store it: a dry-run JSON patch of the live object to that content
// re-applies the server's defaults (a field `kubectl create` owned only
// because the server defaulted it comes back). A patch, because `patch`
// is what an applying identity holds (opm rbac), not `update`.
func (c *Client) withoutRemoved(ctx context.Context, ri dynamic.ResourceInterface, live, planned *unstructured.Unstructured, removed *fieldpath.Set) (*unstructured.Unstructured, error) {
	u := planned.DeepCopy()
	removePaths(u.Object, removed)
	patch, err := json.Marshal(contentPatch(live.Object, u.Object))
	if err != nil {
		return nil, err
	}
	out, err := ri.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: c.opts.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("server dry run of the fields the take-over removes: %w", err)
	}
	return out, nil
}

// contentPatch is a JSON patch that turns from's content into to's: every
// top-level field but the identity, metadata and status, and the labels
// and annotations ("add" replaces a member that exists).
func contentPatch(from, to map[string]any) []map[string]any {
	var ops []map[string]any
	set := func(path string, v any, had, has bool) {
		switch {
		case has:
			ops = append(ops, map[string]any{"op": "add", "path": path, "value": v})
		case had:
			ops = append(ops, map[string]any{"op": "remove", "path": path})
		}
	}
	keys := map[string]bool{}
	for k := range from {
		keys[k] = true
	}
	for k := range to {
		keys[k] = true
	}
	for k := range keys {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		_, had := from[k]
		v, has := to[k]
		set("/"+jsonPointerEscape(k), v, had, has)
	}
	fm, _ := from["metadata"].(map[string]any)
	tm, _ := to["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations"} {
		_, had := fm[k]
		v, has := tm[k]
		set("/metadata/"+k, v, had, has)
	}
	return ops
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
