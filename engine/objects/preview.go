package objects

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Preview reports what applying r would do, changing nothing: the live
// object (nil when absent) and the object as the server would store it
// after the apply (a server-side dry run, so defaults, admission and
// merges are the server's). An object whose namespace or kind does not
// exist yet previews as its rendered form: applying would create it. An
// apply that would change immutable fields returns the live object and an
// *ImmutableError.
//
// live, when known is true, is the object as just read (nil: absent) and
// saves the GET, as for Apply.
func (c *Client) Preview(ctx context.Context, r manifest.Resource, live *unstructured.Unstructured, known bool) (_, planned *unstructured.Unstructured, err error) {
	obj := r.Object
	id := r.ID()
	ri, _, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if fault.KindOf(err) == fault.NotFound {
		return nil, obj, nil // a kind the release's own CRD will add
	}
	if err != nil {
		return nil, nil, fmt.Errorf("preview %s: %w", id, err)
	}
	if !known {
		live, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return nil, nil, fmt.Errorf("get %s: %w", id, err)
		}
	}
	planned, err = c.apply(ctx, ri, obj, true)
	if fields, ok := immutableFields(err); ok {
		return live, nil, &ImmutableError{ID: id, Fields: fields, Err: err}
	}
	if live == nil && apierrors.IsNotFound(err) {
		return nil, obj, nil // its namespace does not exist yet
	}
	if err != nil {
		return live, nil, fmt.Errorf("preview %s (server dry run): %w", id, err)
	}
	return live, planned, nil
}
