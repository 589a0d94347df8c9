package fingerprint

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/opmodel/pipeline/engine/load"
)

// Verify checks that every file a render of keys with in read (read,
// absolute paths: engine/reads) is an input of one of their fingerprints.
// A file read but not covered is named in the error: a skip would have
// missed a change to it. The embedded catalog is the renderer's own
// (its build ID covers it). Releases without a fingerprint (ErrUnsure)
// are never skipped, so a render including one is not checked.
func (t *Tree) Verify(ctx context.Context, keys []string, in Inputs, read []string) error {
	covered := map[string]bool{}
	for _, k := range keys {
		inputs, err := t.Explain(ctx, k, in)
		if errors.Is(err, ErrUnsure) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("verifying what the render read: %w", err)
		}
		for _, i := range inputs {
			if i.Path != "" {
				covered[filepath.Clean(i.Path)] = true
			}
		}
	}
	var missed []string
	for _, p := range read {
		if strings.HasPrefix(p, load.EmbeddedRoot) || covered[filepath.Clean(p)] {
			continue
		}
		missed = append(missed, p)
	}
	if len(missed) == 0 {
		return nil
	}
	return fmt.Errorf("the render of %s (environment %q) read %s, which its input fingerprint does not cover: a skip would miss a change to it. "+
		"This is a bug in opm; --no-skip renders regardless", strings.Join(keys, ", "), in.Environment, strings.Join(missed, ", "))
}
