package pipeline

import (
	"context"
	"fmt"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/redact"
)

// Explanation is why a release × environment may or may not be skipped:
// its input fingerprint and every input it covers, hash by hash (what Go's
// GODEBUG=gocachehash=1 prints for its build cache), or why it has none.
type Explanation struct {
	Release     string              `json:"release"`
	Environment string              `json:"environment,omitempty"`
	Fingerprint string              `json:"fingerprint,omitempty"`
	Inputs      []fingerprint.Input `json:"inputs,omitempty"`
	// Unsure says why there is no fingerprint: such a release always renders.
	Unsure string `json:"unsure,omitempty"`
}

// Explain lists, for every selected release in the selection's
// environment, what its input fingerprint covers. A skip by apply or diff
// happened when the fingerprint equals the inventory's newest change's
// `inputs` (opm inventory shows it); a review skipped a pair when both
// sides' fingerprints are equal.
func Explain(ctx context.Context, sel Selection) ([]Explanation, error) {
	ro := sel.RenderOptions(ctx)
	tree, err := worktreeTree(ctx, ro.Dir)
	if err != nil {
		return nil, err
	}
	keys := ro.Releases
	if len(keys) == 0 {
		keys = tree.Releases()
	}
	in := fingerprint.Inputs{Environment: ro.Environment, ValuesFiles: ro.ValuesFiles, Values: ro.Values, Namespace: ro.Namespace}
	out := make([]Explanation, 0, len(keys))
	for _, k := range keys {
		e := Explanation{Release: k, Environment: ro.Environment}
		inputs, err := tree.Explain(ctx, k, in)
		if err != nil {
			e.Unsure = err.Error()
		} else {
			e.Fingerprint, e.Inputs = fingerprint.Sum(inputs), inputs
			for i, in := range inputs {
				if in.Secret {
					// The hash of a secret, and a fingerprint over it,
					// would confirm a guessed value offline.
					e.Inputs[i].Hash, e.Fingerprint = redact.Mark, "(sealed: the release reads secret values)"
				}
			}
		}
		out = append(out, e)
	}
	if len(out) == 0 && tree.Sure() != nil {
		return nil, fmt.Errorf("explaining %s: %w", ro.Dir, tree.Sure())
	}
	return out, nil
}
