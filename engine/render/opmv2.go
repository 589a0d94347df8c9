package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/opmv2"
)

// pathPlatformRegistry is an environment's platform: the catalogs it
// subscribes to.
var pathPlatformRegistry = cue.ParsePath("platform.registry")

// loadPlatform fetches the catalogs env subscribes to (enabled ones, each
// at its exact version) and indexes their transformers; nil when env
// subscribes to none.
func loadPlatform(ctx context.Context, d *load.Deployment, env cue.Value) (*opmv2.Platform, error) {
	reg := env.LookupPath(pathPlatformRegistry)
	if !reg.Exists() {
		return nil, nil
	}
	var subs struct {
		Registry map[string]struct {
			Version string `json:"version"`
			Enable  *bool  `json:"enable"`
		} `json:"registry"`
	}
	if err := env.LookupPath(cue.ParsePath("platform")).Decode(&subs); err != nil {
		return nil, fault.Validationf("platform: %s", load.Describe(err))
	}
	var catalogs []opmv2.Catalog
	for _, path := range slices.Sorted(maps.Keys(subs.Registry)) {
		s := subs.Registry[path]
		if s.Enable != nil && !*s.Enable {
			continue
		}
		v, err := load.Published(ctx, d.Context, path, s.Version)
		if err != nil {
			return nil, err
		}
		catalogs = append(catalogs, opmv2.Catalog{Path: path, Version: strings.TrimPrefix(s.Version, "v"), Value: v})
	}
	p, err := opmv2.NewPlatform(catalogs)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("platform: %w", err))
	}
	return p, nil
}

// renderV2 renders a release of an OPM v2 module on the environment's
// platform, with upstream's matching and transforms. The instance is the
// release: its name, its namespace, its values; its labels add the
// release's identity and environment to every object, and objects are
// managed by opm (the seeds' identity), not by upstream's runtime name.
func renderV2(cctx *cue.Context, module cue.Value, rc releaseContext, limit *Reach, where string) ([]manifest.Resource, error) {
	if rc.platform == nil {
		return nil, fault.Validationf("%s: its module is an OPM v2 module (opmodel.dev/core@v2), which renders on a platform: subscribe its environment to a catalog, e.g.\n"+
			"      environments: %s: platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0-alpha.4\"", where, envNameOr(rc, "<env>"))
	}
	_, folded, _, err := contextData(rc)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: %w", where, err))
	}
	labels, _ := folded["labels"].(map[string]string)
	res, err := opmv2.Render(cctx, rc.platform, opmv2.Instance{
		Name: rc.release.name, Namespace: rc.release.namespace, Module: module, Values: rc.values,
		Definition: rc.moduleInstance, Labels: labels, RuntimeName: manifest.ManagedByOPM,
	})
	if err != nil {
		var re *opmv2.Error
		if errors.As(err, &re) {
			// CUE's own words, with the positions in the user's files.
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s, %s:\n%s", where, re.Where, load.Describe(re.Err)))
		}
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: %w", where, err))
	}
	if rc.warnings != nil {
		*rc.warnings = append(*rc.warnings, res.Warnings...)
	}
	var out []manifest.Resource
	seen := map[manifest.ID]string{}
	for _, o := range res.Objects {
		u, err := objectOf(o.JSON)
		if err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s, component %q, transformer %s: %w", where, o.Component, o.Transformer, err))
		}
		{
			r := manifest.Resource{Object: u, Component: o.Component}
			if missing := missingIdentity(u); missing != "" {
				return nil, fault.Validationf("%s, component %q: transformer %s renders an object without %s", where, o.Component, o.Transformer, missing)
			}
			if other, dup := seen[r.ID()]; dup {
				return nil, fault.Validationf("%s, component %q: transformer %s renders %s, which %s renders too", where, o.Component, o.Transformer, r.ID(), other)
			}
			seen[r.ID()] = o.Transformer
			if why := limit.Check(r, rc.release.namespace); why != "" {
				return nil, fault.Validationf("%s, component %q: transformer %s %s", where, o.Component, o.Transformer, why)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func envNameOr(rc releaseContext, def string) string {
	if n, err := rc.env.LookupPath(cue.ParsePath("name")).String(); err == nil {
		return n
	}
	return def
}

// moduleInstanceOf is core@v2's #ModuleInstance, from the core the
// deployment's modules resolve to; a value that does not exist when the
// deployment imports no core@v2 (then Render says so).
func moduleInstanceOf(d *load.Deployment) cue.Value {
	for _, path := range []string{"opmodel.dev/core@v2", "opmodel.dev/core"} {
		if core, ok := d.Imported(path); ok {
			return core.LookupPath(cue.MakePath(cue.Def("ModuleInstance")))
		}
	}
	return cue.Value{}
}

// inAuthorOrder re-encodes merged values data (which the merge writes with
// sorted keys) with each struct's fields in the order its authors wrote
// them: first appearance across layers (module values, release values,
// environment values), the rest sorted. Upstream's catalog turns some
// structs into lists in field order (a module's media volumes become a
// pod's volumes), so an OPM v2 release keeps the order upstream's runtime
// sees. The older line keeps sorted values: its renders must not move.
func inAuthorOrder(data []byte, layers ...cue.Value) ([]byte, error) {
	order := map[string][]string{}
	var walk func(path string, v cue.Value)
	walk = func(path string, v cue.Value) {
		if v.IncompleteKind() != cue.StructKind {
			return
		}
		it, err := v.Fields()
		if err != nil {
			return
		}
		for it.Next() {
			k := it.Selector().Unquoted()
			if !slices.Contains(order[path], k) {
				order[path] = append(order[path], k)
			}
			walk(path+"\x00"+k, it.Value())
		}
	}
	for _, l := range layers {
		if l.Exists() {
			walk("", l)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var enc func(path string, v any) error
	enc = func(path string, v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			if l, ok := v.([]any); ok {
				buf.WriteByte('[')
				for i, e := range l {
					if i > 0 {
						buf.WriteByte(',')
					}
					if err := enc(path, e); err != nil {
						return err
					}
				}
				buf.WriteByte(']')
				return nil
			}
			b, err := json.Marshal(v)
			buf.Write(b)
			return err
		}
		keys := slices.Clone(order[path])
		keys = slices.DeleteFunc(keys, func(k string) bool { _, ok := m[k]; return !ok })
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := enc(path+"\x00"+k, m[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	}
	if err := enc("", doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// valueLayers are a release's values as its authors wrote them, in merge
// order: the module's, the release's, the environment's.
func valueLayers(rel cue.Value) []cue.Value {
	return []cue.Value{
		rel.LookupPath(pathModule).LookupPath(cue.ParsePath("values")),
		rel.LookupPath(cue.ParsePath("values")),
		rel.LookupPath(cue.MakePath(cue.Def("#environment"), cue.Str("values"))),
	}
}
