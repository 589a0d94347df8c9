package render

import (
	"context"
	"fmt"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
)

// verifyReads checks that every file this render read (opts.reads) is
// covered by the fingerprints of the releases it rendered (keys): a file
// read but not covered is one a skip would miss a change to.
func verifyReads(ctx context.Context, opts Options, keys []string) error {
	p, err := load.ParseImports(ctx, opts.Dir, nil)
	if err != nil {
		return fmt.Errorf("verifying what the render read: %w", err)
	}
	tree, err := fingerprint.Scan(ctx, p)
	if err != nil {
		return fmt.Errorf("verifying what the render read: %w", err)
	}
	in := fingerprint.Inputs{Environment: opts.Environment, ValuesFiles: opts.ValuesFiles, Values: opts.Values, Namespace: opts.Namespace}
	return tree.Verify(ctx, keys, in, opts.reads.Paths())
}
