package opmv2_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/opmv2"
	"github.com/opmodel/pipeline/internal/opmv2test"
)

const catalogPath, catalogVersion = "opmodel.dev/catalogs/opm@v2", "2.0.0-alpha.4"

// byKindName keys objects "Kind/namespace/name".
func byKindName(t *testing.T, objs []map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		k := fmt.Sprintf("%v/%v/%v", o["kind"], md["namespace"], md["name"])
		_, dup := out[k]
		assert.Assert(t, !dup, "two objects %s", k)
		out[k] = o
	}
	return out
}

func expected(t *testing.T, name string) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(opmv2test.Dir(t), "expected", name+".yaml"))
	assert.NilError(t, err)
	var objs []map[string]any
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var o map[string]any
		assert.NilError(t, yaml.Unmarshal([]byte(doc), &o))
		if o != nil {
			objs = append(objs, o)
		}
	}
	return byKindName(t, objs)
}

func rendered(t *testing.T, res *opmv2.Result) map[string]map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, o := range res.Objects {
		b, err := o.JSON, error(nil)
		assert.NilError(t, err)
		var m map[string]any
		assert.NilError(t, json.Unmarshal(b, &m))
		objs = append(objs, m)
	}
	return byKindName(t, objs)
}

// Upstream's CLI rendered three modules with their debugValues as instance
// NAME in namespace default on a platform subscribed to catalogs/opm@v2
// 2.0.0-alpha.4 (expected/). With upstream's runtime name and no labels of
// opm's own, this package renders the same objects, leaf for leaf, and
// pairs each component with the same transformers.
func TestRendersWhatUpstreamRenders(t *testing.T) {
	opmv2test.Registry(t)
	ctx := t.Context()
	cctx := cuecontext.New()
	cat, err := load.Published(ctx, cctx, catalogPath, catalogVersion)
	assert.NilError(t, err)
	p, err := opmv2.NewPlatform([]opmv2.Catalog{{Path: catalogPath, Version: catalogVersion, Value: cat}})
	assert.NilError(t, err)
	core, err := load.Published(ctx, cctx, "opmodel.dev/core@v2", "2.0.0-alpha.5")
	assert.NilError(t, err)
	def := core.LookupPath(cue.MakePath(cue.Def("ModuleInstance")))
	mods := map[string]opmv2test.Module{}
	for _, m := range opmv2test.Modules(t) {
		mods[m.Dir] = m
	}
	for _, tc := range []struct{ module, instance string }{{"web_app", "web-app"}, {"jellystat", "jellystat"}, {"gotify", "gotify"}} {
		t.Run(tc.module, func(t *testing.T) {
			m := mods[tc.module]
			mod, err := load.Published(ctx, cctx, m.Path, m.Version)
			assert.NilError(t, err)
			assert.Assert(t, opmv2.IsModule(mod))
			res, err := opmv2.Render(cctx, p, opmv2.Instance{Name: tc.instance, Namespace: "default", Module: mod,
				Values: mod.LookupPath(cue.ParsePath("debugValues")), Definition: def, RuntimeName: "opm-cli"})
			assert.NilError(t, err)
			assert.DeepEqual(t, rendered(t, res), expected(t, tc.module))
			assert.DeepEqual(t, matches(res), upstreamMatches(t, tc.module))
		})
	}
}

func matches(res *opmv2.Result) []string {
	var out []string
	for comp, tfs := range res.Matches {
		for _, tf := range tfs {
			out = append(out, comp+" ← "+tf)
		}
	}
	slices.Sort(out)
	return out
}

// upstreamMatches reads "▸ COMPONENT ← TRANSFORMER" lines of upstream's log.
func upstreamMatches(t *testing.T, module string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(opmv2test.Dir(t), "expected", module+".matches.txt"))
	assert.NilError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if _, pair, ok := strings.Cut(l, "▸ "); ok {
			out = append(out, strings.TrimSpace(pair))
		}
	}
	slices.Sort(out)
	return out
}
