package fingerprint_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// lib is a registry module the api release imports, in two versions.
func lib(version, greeting string) deploytest.Module {
	return deploytest.Module{Path: "example.com/lib@v0", Version: version, Files: map[string]string{
		"lib.cue": "package lib\n\ngreeting: \"" + greeting + "\"\n",
	}}
}

const module = `module: "test.example/fp@v0"
language: version: "v0.12.0"
deps: "example.com/lib@v0": v: "v0.1.0"
`

// fixture is a deployment of two releases: web (a local module importing
// a local package, shared) and api (a local module importing a registry
// module, lib), staging and prod, prod with a values file; plus a README
// and a package nobody imports.
func fixture(t *testing.T) string {
	t.Helper()
	return deploytest.Write(t, map[string]string{
		"cue.mod/module.cue": module,
		"shared/shared.cue":  "package shared\n\nstamp: \"s1\"\n",
		"unused/unused.cue":  "package unused\n\nx: 1\n",
		"README.md":          "# the fleet\n",
		"secrets/prod.yaml":  "tier: gold\n",
		"web/web.cue": `package web

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	"test.example/fp/shared"
)

core.#Module
metadata: {apiVersion: "test.example/fp/web@v0", name: "web", version: "1.0.0"}
#config: tier: *"bronze" | string
#components: web: {
	core.#Configs
	spec: configs: "web": data: {stamp: shared.stamp, tier: #config.tier}
}
`,
		"api/api.cue": `package api

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	"example.com/lib@v0"
)

core.#Module
metadata: {apiVersion: "test.example/fp/api@v0", name: "api", version: "1.0.0"}
#config: tier: *"bronze" | string
#components: api: {
	core.#Configs
	spec: configs: "api": data: {greeting: lib.greeting, tier: #config.tier}
}
`,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	webmodule "test.example/fp/web"
	apimodule "test.example/fp/api"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: staging: namespace: "staging"
environments: prod: {namespace: "prod", valuesFiles: ["secrets/prod.yaml"]}

releases: web: #module: webmodule
releases: api: {#module: apimodule}
`,
	})
}

func of(t *testing.T, dir, key string, in fingerprint.Inputs) string {
	t.Helper()
	p, err := load.ParseImports(t.Context(), dir, nil)
	assert.NilError(t, err)
	tree, err := fingerprint.Scan(t.Context(), p)
	assert.NilError(t, err)
	fp, err := tree.Of(t.Context(), key, in)
	assert.NilError(t, err)
	assert.Assert(t, strings.HasPrefix(fp, fingerprint.Prefix))
	return fp
}

func edit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		b = nil
	} else {
		assert.NilError(t, err)
	}
	if old != "" {
		assert.Assert(t, strings.Contains(string(b), old), "%s holds no %q", file, old)
	}
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)+map[bool]string{true: "", false: new}[old != ""]), 0o644))
}

// Every kind of input a release reads changes its fingerprint; what it
// does not read leaves it alone.
func TestFingerprintFollowsEveryInputAndNothingElse(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"), lib("v0.2.0", "hi"))
	dir := fixture(t)
	prod := fingerprint.Inputs{Environment: "prod"}
	all := func() map[string]string {
		return map[string]string{
			"web/prod": of(t, dir, "web", prod), "web/staging": of(t, dir, "web", fingerprint.Inputs{Environment: "staging"}),
			"api/prod": of(t, dir, "api", prod),
		}
	}
	before := all()
	assert.Assert(t, before["web/prod"] != before["web/staging"], "the environment is an input")
	assert.Assert(t, before["web/prod"] != before["api/prod"], "the release is an input")

	cases := []struct {
		name    string
		change  func()
		changed []string // the rest must stay equal
	}{
		{"a file nobody reads", func() { edit(t, dir, "README.md", "fleet", "fleets") }, nil},
		{"a package nobody imports", func() { edit(t, dir, "unused/unused.cue", "x: 1", "x: 2") }, nil},
		{"a new package nobody imports", func() { edit(t, dir, "other/other.cue", "", "package other\n") }, nil},
		{"the web module", func() { edit(t, dir, "web/web.cue", `"1.0.0"`, `"1.0.1"`) }, []string{"web/prod", "web/staging"}},
		{"a package the web module imports", func() { edit(t, dir, "shared/shared.cue", "s1", "s2") }, []string{"web/prod", "web/staging"}},
		{"the api module", func() { edit(t, dir, "api/api.cue", `"1.0.0"`, `"1.0.2"`) }, []string{"api/prod"}},
		{"prod's values file", func() { edit(t, dir, "secrets/prod.yaml", "gold", "platinum") }, []string{"web/prod", "api/prod"}},
		{"the root package", func() { edit(t, dir, "deploy.cue", `namespace: "staging"`, `namespace: "stage"`) }, []string{"web/prod", "web/staging", "api/prod"}},
		// Only the release whose closure the pin moves: web imports no lib.
		{"a registry dependency's version", func() { edit(t, dir, "cue.mod/module.cue", "v0.1.0", "v0.2.0") }, []string{"api/prod"}},
		{"the module file's language version", func() {
			edit(t, dir, "cue.mod/module.cue", `language: version: "v0.12.0"`, `language: version: "v0.13.0"`)
		}, []string{"web/prod", "web/staging", "api/prod"}},
	}
	for _, c := range cases {
		c.change()
		after := all()
		for k, v := range after {
			want := slicesContains(c.changed, k)
			assert.Check(t, (v != before[k]) == want, "%s: %s changed=%v, want %v", c.name, k, v != before[k], want)
		}
		before = after
	}

	// -f files, in-memory values and a namespace override by content.
	f := deploytest.Values(t, `tier: "silver"`)
	withF := of(t, dir, "web", fingerprint.Inputs{Environment: "prod", ValuesFiles: []string{f}})
	assert.Assert(t, withF != before["web/prod"])
	assert.NilError(t, os.WriteFile(f, []byte(`tier: "iron"`+"\n"), 0o644))
	assert.Assert(t, of(t, dir, "web", fingerprint.Inputs{Environment: "prod", ValuesFiles: []string{f}}) != withF)
	mem := func(data string) string {
		return of(t, dir, "web", fingerprint.Inputs{Environment: "prod", Values: []values.Input{{Name: "secret", Data: []byte(data), Secret: true}}})
	}
	assert.Assert(t, mem("tier: a\n") != mem("tier: b\n"))
	assert.Assert(t, of(t, dir, "web", fingerprint.Inputs{Environment: "prod", Namespace: "smoke-1"}) != before["web/prod"])
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Equal fingerprints, here of the same deployment in two directories (a
// review's base worktree and head), mean byte-identical renders.
func TestEqualFingerprintsRenderIdentically(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"), lib("v0.2.0", "hi"))
	a, b := fixture(t), fixture(t)
	for _, key := range []string{"web", "api"} {
		for _, env := range []string{"staging", "prod"} {
			in := fingerprint.Inputs{Environment: env}
			assert.Equal(t, of(t, a, key, in), of(t, b, key, in), "%s/%s", key, env)
			ra, rb := renderOne(t, a, key, env), renderOne(t, b, key, env)
			assert.Equal(t, ra.ManifestDigest, rb.ManifestDigest)
			assert.Equal(t, ra.ChangeID, rb.ChangeID)
			assert.Equal(t, objectsJSON(t, ra), objectsJSON(t, rb))
		}
	}
	// And a change the fingerprint sees is one the render sees.
	edit(t, b, "shared/shared.cue", "s1", "s2")
	assert.Assert(t, of(t, a, "web", fingerprint.Inputs{Environment: "prod"}) != of(t, b, "web", fingerprint.Inputs{Environment: "prod"}))
	assert.Assert(t, renderOne(t, a, "web", "prod").ManifestDigest != renderOne(t, b, "web", "prod").ManifestDigest)
}

func objectsJSON(t *testing.T, r *render.Release) string {
	var out []byte
	for _, res := range r.Resources {
		b, err := json.Marshal(res.Object.Object)
		assert.NilError(t, err)
		out = append(append(out, b...), '\n')
	}
	return string(out)
}

func renderOne(t *testing.T, dir, key, env string) *render.Release {
	t.Helper()
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: env, Releases: []string{key}})
	assert.NilError(t, err)
	return rels[0]
}

// Where the syntax does not show what a release reads, the fingerprint
// is refused (the caller renders), never guessed.
func TestFingerprintIsRefusedWhereTheSyntaxCannotTell(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	for name, c := range map[string]struct{ file, old, new string }{
		"a comprehension":         {"deploy.cue", "releases: api: {#module: apimodule}", "for k, m in {api: apimodule} {releases: (k): #module: m}"},
		"a release using another": {"deploy.cue", "releases: api: {#module: apimodule}", "releases: api: {#module: apimodule}\nreleases: api2: releases.api"},
		// CUE's aliasv2 experiment (per file): self is the innermost
		// block, here the file, so self["releases"] reads every release.
		"self (aliasv2)":                        {"extra.cue", "", "@experiment(aliasv2)\n\npackage deploy\n\n_other: self[\"releases\"].api.#module\n"},
		"a postfix alias of releases (aliasv2)": {"extra.cue", "", "@experiment(aliasv2)\n\npackage deploy\n\nreleases~R: _\n_other: R.api.#module\n"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := fixture(t)
			if c.old == "" {
				assert.NilError(t, os.WriteFile(filepath.Join(dir, c.file), []byte(c.new), 0o644))
			} else {
				edit(t, dir, c.file, c.old, c.new)
			}
			if strings.Contains(c.new, "@experiment") {
				edit(t, dir, "cue.mod/module.cue", `version: "v0.12.0"`, `version: "v0.15.0"`)
				// The release still renders: a skip would be wrong, not an error.
				renderOne(t, dir, "web", "prod")
			}
			p, err := load.ParseImports(t.Context(), dir, nil)
			assert.NilError(t, err)
			tree, err := fingerprint.Scan(t.Context(), p)
			assert.NilError(t, err)
			_, err = tree.Of(t.Context(), "web", fingerprint.Inputs{Environment: "prod"})
			assert.Assert(t, errors.Is(err, fingerprint.ErrUnsure), "%v", err)
		})
	}
}

// Rendering a selection evaluates only what it reaches (PrunedRoot): a
// module only another release imports may even be broken. The render of
// the selected release is the one the whole deployment gives, and errors
// in what is kept keep their file:line.
func TestPrunedRootRendersTheSelectionOnly(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	whole, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod"})
	assert.NilError(t, err)
	assert.Equal(t, len(whole), 2)
	one := renderOne(t, dir, "web", "prod")
	assert.Equal(t, whole[1].Key, "web")
	assert.Equal(t, objectsJSON(t, one), objectsJSON(t, whole[1]))
	assert.Equal(t, one.ChangeID, whole[1].ChangeID)

	ov := fingerprint.PrunedRoot(context.Background(), dir, []string{"web"}, nil)
	assert.Assert(t, ov != nil)
	pruned := string(ov[filepath.Join(dir, "deploy.cue")])
	assert.Assert(t, !strings.Contains(pruned, "apimodule"), pruned)
	assert.Assert(t, strings.Contains(pruned, "webmodule"), pruned)
	assert.Equal(t, strings.Count(pruned, "\n"), strings.Count(readFile(t, dir, "deploy.cue"), "\n"), "lines are kept")

	// The api module breaks: web alone still renders, everything does not.
	edit(t, dir, "api/api.cue", `greeting: lib.greeting`, `greeting: lib.greeting & 5`)
	renderOne(t, dir, "web", "prod")
	_, err = render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod"})
	assert.ErrorContains(t, err, "api.cue")

	// An error in what is kept is reported where it is.
	edit(t, dir, "deploy.cue", "releases: web: #module: webmodule", "releases: web: {#module: webmodule, values: tier: 7}")
	_, err = render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod", Releases: []string{"web"}})
	assert.ErrorContains(t, err, "deploy.cue:15:51") // the line of the release, as in the file
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	assert.NilError(t, err)
	return string(b)
}

// A let only another release uses is unreferenced once that release is
// pruned away: CUE refuses such a root, and the render of the selection
// loads the whole root instead (found by FuzzSkipsAreSound).
func TestPrunedRootThatDoesNotBuildFallsBackToTheWholeRoot(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	edit(t, dir, "deploy.cue", "releases: api: {#module: apimodule}", "let level = \"gold\"\nreleases: api: {#module: apimodule, values: tier: level}")
	assert.Assert(t, fingerprint.PrunedRoot(context.Background(), dir, []string{"web"}, nil) != nil, "the premise: web's selection is pruned")
	r := renderOne(t, dir, "web", "prod")
	assert.Assert(t, r.ManifestDigest != "")
}

// FuzzSumIsTheFormulaItReplaced: fingerprints are stored (inventories,
// caches), so how Sum hashes an input must not move when its code does.
// The reference is the formula as first written, with fmt.
func FuzzSumIsTheFormulaItReplaced(f *testing.F) {
	f.Add("package", "catalog@v0|a.cue", "3f2a", "values", "", "")
	f.Add("", "", "", "x\x00y", "é 1", "\x00\x00")
	f.Fuzz(func(t *testing.T, k1, n1, h1, k2, n2, h2 string) {
		inputs := []fingerprint.Input{{Kind: k1, Name: n1, Hash: h1}, {Kind: k2, Name: n2, Hash: h2}}
		h := sha256.New()
		for _, in := range inputs {
			fmt.Fprintf(h, "%s\x00%d\x00", in.Kind+" "+in.Name, len(in.Hash))
			h.Write([]byte(in.Hash))
		}
		want := fingerprint.Prefix + hex.EncodeToString(h.Sum(nil))
		if got := fingerprint.Sum(inputs); got != want {
			t.Fatalf("Sum(%+v) = %s, the formula gives %s", inputs, got, want)
		}
	})
}
