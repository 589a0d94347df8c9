package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/opmodel/pipeline/engine/values"
)

// Masked stands for a Secret value in apply and prune results.
const Masked = "(masked)"

// masked returns a copy of r for results other than render's: Secret
// data and stringData values are replaced by Masked, and so is every
// string in the resolved values that a Secret carries (whole or inside a
// longer value), in values and in valuesText, because the values are
// where Secret content comes from.
// Render prints both on purpose, as `helm template` does; apply and prune
// results go to CI logs, job summaries and Dagger outputs.
func (r RenderedRelease) masked() RenderedRelease {
	var secrets []string
	out := r
	out.Resources = make([]map[string]any, 0, len(r.Resources))
	var fromSecretSources []string
	if r.release != nil {
		fromSecretSources = r.release.Secrets
	}
	for _, obj := range r.Resources {
		if obj["kind"] != "Secret" || obj["apiVersion"] != "v1" {
			out.Resources = append(out.Resources, redactObject(obj, fromSecretSources))
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
			for k, v := range m {
				if s, ok := v.(string); ok {
					secrets = append(secrets, s)
					if field == "data" {
						if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
							secrets = append(secrets, string(dec))
						}
					}
				}
				mm[k] = Masked
			}
			c[field] = mm
		}
		out.Resources = append(out.Resources, c)
	}
	if len(secrets) == 0 {
		return out
	}
	out.ValuesText = maskText(r.ValuesText, secrets)
	if len(r.Values) == 0 {
		return out
	}
	var values any
	if err := json.Unmarshal(r.Values, &values); err != nil {
		out.Values = json.RawMessage(`"` + Masked + `"`)
		return out
	}
	values = maskStrings(values, secrets)
	b, err := json.Marshal(values)
	if err != nil {
		out.Values = json.RawMessage(`"` + Masked + `"`)
		return out
	}
	out.Values = b
	return out
}

// WithoutSecretValues returns a copy of r in which every release that
// renders values from a secret source (SOPS files, secret inputs) has its
// Secret data masked and those values redacted from its other objects, as
// apply's results are. For outputs that persist (a Dagger File); render
// itself shows the operator everything, as `sops -d` would.
func (r *RenderResult) WithoutSecretValues() *RenderResult {
	out := &RenderResult{Releases: make([]RenderedRelease, 0, len(r.Releases))}
	for _, rel := range r.Releases {
		if rel.release != nil && len(rel.release.Secrets) > 0 {
			rel = rel.masked()
		}
		out.Releases = append(out.Releases, rel)
	}
	return out
}

// maskStrings replaces every string in v that occurs in one of secrets.
func maskStrings(v any, secrets []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskStrings(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = maskStrings(e, secrets)
		}
	case string:
		if x == "" {
			return x
		}
		for _, s := range secrets {
			if strings.Contains(s, x) {
				return Masked
			}
		}
	}
	return v
}

// maskText replaces each quoted string of CUE text that occurs in one of
// secrets, and any secret found verbatim in it.
func maskText(text string, secrets []string) string {
	var b strings.Builder
	rest := text
	for {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i+1:], '"')
		if j < 0 {
			b.WriteString(rest)
			break
		}
		lit := rest[i+1 : i+1+j]
		b.WriteString(rest[:i+1])
		if masked := maskStrings(lit, secrets); masked == Masked {
			b.WriteString(Masked)
		} else {
			b.WriteString(lit)
		}
		b.WriteByte('"')
		rest = rest[i+1+j+1:]
	}
	out := b.String()
	for _, s := range secrets {
		if len(s) >= 4 {
			out = strings.ReplaceAll(out, s, Masked)
		}
	}
	return out
}

// redactObject returns obj, or a copy of it with secret values (from SOPS
// files or secret inputs, which may flow into any object) redacted from
// every string.
func redactObject(obj map[string]any, secrets []string) map[string]any {
	if len(secrets) == 0 {
		return obj
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			c := make(map[string]any, len(x))
			for k, e := range x {
				c[k] = walk(e)
			}
			return c
		case []any:
			c := make([]any, len(x))
			for i, e := range x {
				c[i] = walk(e)
			}
			return c
		case string:
			return values.Redact(x, secrets)
		}
		return v
	}
	return walk(obj).(map[string]any)
}
