package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/format"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
)

// componentCache keeps, in the one cache, what each component of a shared
// release rendered to, keyed from syntax rather than from an evaluation:
// a component whose entry is there is not built at all, so a render whose
// values moved for a tenth of the components builds a tenth of them. The
// transform cache (transforms) needs each component evaluated for its key
// and holds no Secret; this one needs neither.
//
// What a component of a cut module renders is a function of its own
// declarations (cuttable: it reads no other component), the rest of the
// module's files, the catalog and transformers embedded in the running
// executable (its build ID), the release's context, and the values it
// reads. So the key is made of exactly those: the syntax of the component,
// of every other declaration of the module but the components, the build
// ID, the release's metadata and environment, and the merged values at the
// top-level #config fields the component's syntax selects (configReads) —
// or all of them when it reads #config whole or a field of the module, or
// when a field of #config reads anything beyond itself (it could then move
// with another value). It is used only where every package the module
// imports is embedded (the catalog) or CUE's own; never for a release with
// secret values (the caller leaves the cache out).
//
// An entry may hold a Secret's data, so it is sealed (engine/cache's
// sealed entries): encrypted, and named by an HMAC, under a key that is
// not in the cache directory. With verify, every component is built
// anyway and an entry that differs from it is an error (errCacheDiffers).
type componentCache struct {
	c      *cache.Cache
	verify bool
	// prefix hashes what every component's key shares.
	prefix []byte
	// syntax is each component's declarations, formatted.
	syntax map[string][]byte
	reads  map[string]configRead
	// values are the merged values' top-level fields, whole their JSON;
	// tangled says a #config field reads beyond itself.
	values  map[string]json.RawMessage
	whole   []byte
	tangled bool
}

// componentEntry is what a component rendered to: its objects in render
// order and its spec as the reference checks read it.
type componentEntry struct {
	Objects []json.RawMessage `json:"objects"`
	Spec    json.RawMessage   `json:"spec"`
}

// errCacheDiffers is a verified entry that is not what the build gives:
// never healed by rendering again, it fails the render.
var errCacheDiffers = errors.New("a component cache entry differs from the render")

// newComponentCache is the component cache of a share job, or nil when it
// cannot be used (no sealing cache, a module that imports a package of its
// own, anything that does not format).
func newComponentCache(use cacheUse, j shareJob, names []string, ts []transformer) *componentCache {
	if use.cache == nil || !embeddedImports(j.module, map[*build.Instance]bool{}) || !use.cache.Sealing() {
		return nil
	}
	id, err := buildinfo.BuildID()
	if err != nil {
		return nil
	}
	h := sha256.New()
	// releaseMeta holds strings and maps (printed sorted): the same
	// release prints the same.
	fmt.Fprintf(h, "opm-component-v1\x00%s\x00%#v\x00%s\x00", id, j.rc.release, j.env)
	for _, t := range ts {
		if !t.embedded() {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%s\x00", t.provider, t.fqn)
	}
	// The module file says which CUE language the package is evaluated as.
	if j.module.Root != "" {
		b, err := os.ReadFile(filepath.Join(j.module.Root, "cue.mod", "module.cue"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		fmt.Fprintf(h, "module.cue\x00%s\x00", b)
	}
	cc := &componentCache{c: use.cache, verify: use.verify, reads: j.reads, syntax: map[string][]byte{}}
	files := slices.Clone(j.module.Files)
	slices.SortFunc(files, func(a, b *ast.File) int { return strings.Compare(a.Filename, b.Filename) })
	for _, f := range files {
		h.Write([]byte("file\x00")) // what it says, wherever the checkout is
		for _, decl := range f.Decls {
			field, ok := decl.(*ast.Field)
			if ok && labelName(field.Label) == "#components" {
				st, ok := field.Value.(*ast.StructLit)
				if !ok {
					return nil
				}
				for _, el := range st.Elts {
					c, ok := el.(*ast.Field)
					if !ok {
						return nil // cuttable modules declare fields only
					}
					b, err := format.Node(c)
					if err != nil {
						return nil
					}
					name := labelName(c.Label)
					cc.syntax[name] = append(append(cc.syntax[name], b...), 0)
				}
				continue
			}
			if ok && labelName(field.Label) == "#config" && !selfContained(field) {
				cc.tangled = true
			}
			if e, ok := decl.(*ast.EmbedDecl); ok && !importedDefinition(e.Expr) {
				cc.tangled = true // an embedding may say anything of #config
			}
			b, err := format.Node(decl)
			if err != nil {
				return nil
			}
			h.Write(b)
			h.Write([]byte{0})
		}
	}
	for _, n := range names {
		if cc.syntax[n] == nil {
			return nil
		}
	}
	cc.prefix = h.Sum(nil)
	cc.whole = j.values
	if err := json.Unmarshal(j.values, &cc.values); err != nil {
		return nil
	}
	return cc
}

// embeddedImports reports whether every package inst imports, directly or
// not, is embedded in the executable (CUE's own packages are not listed).
func embeddedImports(inst *build.Instance, seen map[*build.Instance]bool) bool {
	for _, imp := range inst.Imports {
		if seen[imp] {
			continue
		}
		seen[imp] = true
		for _, f := range imp.Files {
			if !strings.HasPrefix(f.Filename, load.EmbeddedRoot) {
				return false
			}
		}
		if !embeddedImports(imp, seen) {
			return false
		}
	}
	return true
}

// importedDefinition reports whether e is a definition of an imported
// package (`core.#Module`): embedded, its say on #config is the
// executable's.
func importedDefinition(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && importOf(sel.X) != "" && strings.HasPrefix(labelName(sel.Sel), "#")
}

// selfContained reports whether every field of a #config declaration
// reads nothing beyond itself but imported packages and CUE's own names:
// then the value of a #config field is its schema and the values at it,
// whatever the other values are.
func selfContained(config *ast.Field) bool {
	st, ok := config.Value.(*ast.StructLit)
	if !ok {
		return false
	}
	for _, el := range st.Elts {
		f, ok := el.(*ast.Field)
		if !ok {
			return false
		}
		if r := componentReads(f, nil); r.all || len(r.keys) > 0 {
			return false
		}
	}
	return true
}

// key is the entry of component name rendered with values (their
// top-level fields, whole their JSON), with the spec checks or without
// (a stand-in render's).
func (cc *componentCache) key(name string, values map[string]json.RawMessage, whole []byte, checked bool) string {
	h := sha256.New()
	h.Write(cc.prefix)
	h.Write(cc.syntax[name])
	fmt.Fprintf(h, "checked=%t\x00", checked)
	r, ok := cc.reads[name]
	if !ok || r.all || cc.tangled {
		fmt.Fprintf(h, "all\x00%s", whole)
	} else {
		for _, k := range slices.Compact(slices.Sorted(slices.Values(r.keys))) {
			v, set := values[k]
			fmt.Fprintf(h, "%q\x00%t\x00%s\x00", k, set, v)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// getKey returns the entry stored under key; ok is false on a miss.
func (cc *componentCache) getKey(key string) (e componentEntry, ok bool) {
	b, ok := cc.c.GetSealed(cache.Component, key)
	if !ok {
		return e, false
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, false
	}
	return e, true
}

// resources are an entry's objects, as a render returns them.
func (e componentEntry) resources(component string) ([]manifest.Resource, error) {
	out := make([]manifest.Resource, 0, len(e.Objects))
	for _, b := range e.Objects {
		u, err := objectOf(b)
		if err != nil {
			return nil, err
		}
		out = append(out, manifest.Resource{Object: u, Component: component})
	}
	return out, nil
}

// entryOf is what a component rendered, as an entry.
func entryOf(objs []manifest.Resource, spec componentSpec) (componentEntry, error) {
	e := componentEntry{Objects: make([]json.RawMessage, 0, len(objs))}
	for _, o := range objs {
		b, err := json.Marshal(o.Object.Object)
		if err != nil {
			return e, err
		}
		e.Objects = append(e.Objects, b)
	}
	var err error
	e.Spec, err = json.Marshal(spec)
	return e, err
}

// same reports whether two entries hold the same objects and spec.
func (e componentEntry) same(o componentEntry) bool {
	return bytes.Equal(e.Spec, o.Spec) && e.sameObjects(o)
}

// sameObjects reports whether two entries hold the same objects.
func (e componentEntry) sameObjects(o componentEntry) bool {
	return slices.EqualFunc(e.Objects, o.Objects, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })
}

// put stores an entry; a cache that cannot be written is no cache.
func (cc *componentCache) put(key string, e componentEntry) {
	if b, err := json.Marshal(e); err == nil {
		_ = cc.c.PutSealed(cache.Component, key, b)
	}
}
