package render

import (
	"context"

	"github.com/opmodel/pipeline/engine/load"
)

// FromDeployment renders releases of an already loaded deployment, one
// after the other: the sequential oracle the parallel render is checked
// against.
func FromDeployment(ctx context.Context, d *load.Deployment, opts Options) ([]*Release, error) {
	return NewSession(d).Render(ctx, opts)
}
