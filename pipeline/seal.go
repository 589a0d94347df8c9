package pipeline

import (
	"slices"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Public outputs (pull-request comments, job summaries, the Action's
// outputs, review Markdown) are read by people who also have the
// repository. For a release whose manifest holds secret data, a digest or
// change ID there would let them confirm guesses of the secret offline, so
// front doors pass such results through Sealed first: the identifiers of
// sensitive releases become keyed HMACs (manifest.Sealer). Results for the
// operator (render -o json, the inventory, history) keep the seeds'
// recomputable identifiers.

// NewSealer returns a sealer keyed by key (OPM_SEAL_KEY, a CI secret, so
// sealed identifiers stay comparable across runs), or by a random key of
// this run when key is empty.
func NewSealer(key string) *manifest.Sealer { return manifest.NewSealer([]byte(key)) }

// Sealed returns a copy of r whose sensitive releases show sealed digests
// and change IDs.
func (r *ApplyResult) Sealed(s *manifest.Sealer) *ApplyResult {
	out := *r
	out.Releases = slices.Clone(r.Releases)
	for i, ar := range out.Releases {
		if ar.Sensitive {
			ar.ManifestDigest, ar.ChangeID = s.Digest(ar.ManifestDigest), s.ChangeID(ar.ChangeID)
			ids := make([]string, len(ar.Inventory.ChangeIDs))
			for k, id := range ar.Inventory.ChangeIDs {
				ids[k] = s.ChangeID(id)
			}
			ar.Inventory.ChangeIDs = ids
			if ar.Inventory.Previous != "" {
				ar.Inventory.Previous = s.ChangeID(ar.Inventory.Previous)
			}
			out.Releases[i] = ar
		}
	}
	return &out
}
