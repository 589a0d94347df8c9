package objects

import (
	"context"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Delete deletes an object, whoever's it is, with background propagation
// and does not wait for finalizers. It resolves the kind to the server's preferred version,
// not the version the object was applied with, which the server may no
// longer serve (RFC 004 edge case 6). A missing object, or a kind the
// server no longer serves, counts as deleted with Reason "already gone".
// The error is the API error (Forbidden is the caller's to judge). Apply and delete use DeleteOwned;
// the tests check the deleting itself through this.
func (c *Client) Delete(ctx context.Context, id manifest.ID) (Result, error) {
	ri, res, served, err := c.forDelete(id)
	if !served || err != nil {
		return res, err
	}
	return c.deleteNow(ctx, ri, res, nil)
}
