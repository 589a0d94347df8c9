package pipeline

import (
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/pipeline/change"
)

// Masked stands for a Secret value in apply and prune results.
const Masked = "(masked)"

// masked returns a copy of r for results other than render's: Secret
// data and stringData values are replaced by Masked, and so is every field
// of any other object that a secret reaches (engine/taint found them by
// rendering again with stand-ins), including an object's name. Values and
// valuesText come masked from the render. Nothing is masked for its text:
// a public field that equals a secret stays as it is, so the mask tells
// nobody which public strings are secret.
// Render prints everything on purpose, as `helm template` does; apply and
// prune results go to CI logs, job summaries and Dagger outputs.
func (r RenderedRelease) masked() RenderedRelease {
	out := r
	out.Resources = make([]map[string]any, 0, len(r.Resources))
	for i, obj := range r.Resources {
		if r.release != nil && i < len(r.release.SecretFields) && len(r.release.SecretFields[i]) > 0 {
			obj = taint.Mask(obj, r.release.SecretFields[i], func(any) any { return Masked }, func(string) string { return Masked }).(map[string]any)
		}
		if obj["kind"] != "Secret" || obj["apiVersion"] != "v1" {
			out.Resources = append(out.Resources, obj)
			continue
		}
		c := make(map[string]any, len(obj))
		for k, v := range obj {
			c[k] = v
		}
		for _, field := range []string{"data", "stringData"} {
			m, ok := obj[field].(map[string]any)
			if !ok {
				if obj[field] != nil {
					c[field] = Masked
				}
				continue
			}
			mm := make(map[string]any, len(m))
			for k := range m {
				mm[k] = Masked
			}
			c[field] = mm
		}
		out.Resources = append(out.Resources, c)
	}
	return out
}

// WithoutSecretValues returns a copy of r in which every release that
// holds secret data (a Secret's values, values from a secret source) has
// its Secret data and every field a secret reaches masked, as apply's
// results are. For outputs that persist (a Dagger File); render
// itself shows the operator everything, as `sops -d` would.
func (r *RenderResult) WithoutSecretValues() *RenderResult {
	out := &RenderResult{Releases: make([]RenderedRelease, 0, len(r.Releases))}
	for _, rel := range r.Releases {
		if rel.Sensitive {
			rel = rel.masked()
		}
		out.Releases = append(out.Releases, rel)
	}
	return out
}

// orderHidden orders each list of ar as hiddenLast does.
func (ar *AppliedRelease) orderHidden(red *redact.Redactor) {
	for _, list := range [][]ObjectChange{ar.Applied, ar.Stale, ar.Pruned, ar.Skipped, ar.Ghosts} {
		change.HiddenLast(red, list, func(o ObjectChange) string { return o.Name }, func(ObjectChange) string { return "" })
	}
}
