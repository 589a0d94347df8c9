package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Digest identifies the rendered content of every release at once: the
// manifest digest itself when there is one release, else SHA-256 over one
// "name environment digest" line per release, in order. A pipeline can
// compare it between runs to know whether anything it deploys changed.
func (r *RenderResult) Digest() string {
	if len(r.Releases) == 1 {
		return r.Releases[0].ManifestDigest
	}
	return combine(r.Releases, func(rel RenderedRelease) string { return rel.ManifestDigest })
}

// ChangeID is the change ID of the one release, or a combined one (the
// first 8 hex of SHA-256 over every release's change ID line) for several.
func (r *RenderResult) ChangeID() string {
	if len(r.Releases) == 1 {
		return r.Releases[0].ChangeID
	}
	sum := combine(r.Releases, func(rel RenderedRelease) string { return rel.ChangeID })
	return "change-sha256-" + strings.TrimPrefix(sum, "sha256:")[:8]
}

// ReleaseID is the release id when exactly one release was rendered.
func (r *RenderResult) ReleaseID() string {
	if len(r.Releases) == 1 {
		return r.Releases[0].ReleaseID
	}
	return ""
}

func combine(rels []RenderedRelease, field func(RenderedRelease) string) string {
	h := sha256.New()
	for _, rel := range rels {
		fmt.Fprintf(h, "%s %s %s\n", rel.Name, rel.Environment, field(rel))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// PrunedObjects lists what apply or prune deleted, as
// "release: kind.group/namespace/name".
func (r *ApplyResult) PrunedObjects() []string {
	var out []string
	for _, rel := range r.Releases {
		for _, o := range rel.Pruned {
			out = append(out, rel.Name+": "+ObjectRef{Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}.String())
		}
	}
	return out
}
