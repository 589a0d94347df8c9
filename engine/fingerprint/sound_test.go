package fingerprint_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	opmcache "github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// moves edits an input and checks both that the render changed (the edit
// matters) and that the fingerprint did: a skip on it would be wrong.
func moves(t *testing.T, dir, key, env string, change func()) {
	t.Helper()
	in := fingerprint.Inputs{Environment: env}
	fp, digest := of(t, dir, key, in), renderOne(t, dir, key, env).ManifestDigest
	change()
	after := renderOne(t, dir, key, env).ManifestDigest
	assert.Assert(t, after != digest, "the edit does not change the render of %s in %s: the test proves nothing", key, env)
	assert.Assert(t, of(t, dir, key, in) != fp, "the render of %s in %s changed, its fingerprint did not", key, env)
}

// The constructs issue 36 found unsound: each changes the render, each
// must move the fingerprint.
func TestFingerprintMovesWithWhatTheRenderReads(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"), deploytest.Module{Path: "example.com/envs@v0", Version: "v0.1.0", Files: map[string]string{
		"envs.cue": "package envs\n\n#Staging: {namespace: \"staging\", valuesFiles: [\"registry.yaml\"], ...}\n",
	}})
	t.Run("a file an imported package embeds", func(t *testing.T) {
		dir := fixture(t)
		write(t, dir, "web/data.json", `{"stamp": "e1"}`)
		edit(t, dir, "web/web.cue", "package web", "@extern(embed)\n\npackage web")
		edit(t, dir, "web/web.cue", "stamp: shared.stamp", "stamp: shared.stamp + embedded.stamp")
		edit(t, dir, "web/web.cue", "core.#Module\n", "core.#Module\nembedded: _ @embed(file=\"data.json\")\n")
		moves(t, dir, "web", "staging", func() { edit(t, dir, "web/data.json", "e1", "e2") })
	})
	t.Run("a values file of a hidden helper", func(t *testing.T) {
		dir := fixture(t)
		write(t, dir, "common.yaml", "tier: silver\n")
		edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`,
			"environments: {\n\t_common: valuesFiles: [\"common.yaml\"]\n\tstaging: _common & {namespace: \"staging\"}\n}")
		moves(t, dir, "web", "staging", func() { edit(t, dir, "common.yaml", "silver", "gold") })
	})
	t.Run("a values file declared two packages away", func(t *testing.T) {
		dir := fixture(t)
		write(t, dir, "far.yaml", "tier: silver\n")
		write(t, dir, "envbase/base.cue", "package envbase\n\n#Base: {valuesFiles: [\"far.yaml\"], ...}\n")
		write(t, dir, "envdefs/defs.cue", "package envdefs\n\nimport \"test.example/fp/envbase\"\n\nstaging: envbase.#Base & {namespace: \"staging\"}\n")
		edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`, `environments: staging: envdefs.staging`)
		edit(t, dir, "deploy.cue", "import (", "import (\n\t\"test.example/fp/envdefs\"")
		moves(t, dir, "web", "staging", func() { edit(t, dir, "far.yaml", "silver", "gold") })
	})
	t.Run("a values file a registry module's definition declares", func(t *testing.T) {
		dir := fixture(t)
		edit(t, dir, "cue.mod/module.cue", `deps: "example.com/lib@v0": v: "v0.1.0"`, "deps: \"example.com/lib@v0\": v: \"v0.1.0\"\ndeps: \"example.com/envs@v0\": v: \"v0.1.0\"")
		write(t, dir, "registry.yaml", "tier: silver\n")
		edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`, `environments: staging: envs.#Staging`)
		edit(t, dir, "deploy.cue", "import (", "import (\n\t\"example.com/envs@v0\"")
		moves(t, dir, "web", "staging", func() { edit(t, dir, "registry.yaml", "silver", "gold") })
	})
	t.Run("valuesFiles under an escaped label", func(t *testing.T) {
		dir := fixture(t)
		write(t, dir, "escaped.yaml", "tier: silver\n")
		edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`, `environments: staging: {namespace: "staging", "values\u0046iles": ["escaped.yaml"]}`)
		moves(t, dir, "web", "staging", func() { edit(t, dir, "escaped.yaml", "silver", "gold") })
	})
	t.Run("computed valuesFiles", func(t *testing.T) {
		dir := fixture(t)
		edit(t, dir, "deploy.cue", `valuesFiles: ["secrets/prod.yaml"]`, `valuesFiles: ["secrets/" + "prod.yaml"]`)
		moves(t, dir, "web", "prod", func() { edit(t, dir, "secrets/prod.yaml", "gold", "platinum") })
	})
	t.Run("a values file outside the deployment directory", func(t *testing.T) {
		dir := fixture(t)
		outside := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-shared.yaml")
		assert.NilError(t, os.WriteFile(outside, []byte("tier: silver\n"), 0o644))
		t.Cleanup(func() { os.Remove(outside) })
		edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`, `environments: staging: {namespace: "staging", valuesFiles: ["../`+filepath.Base(outside)+`"]}`)
		moves(t, dir, "web", "staging", func() { assert.NilError(t, os.WriteFile(outside, []byte("tier: gold\n"), 0o644)) })
	})
}

// The standard library is part of CUE: importing it must not switch
// fingerprints off, in the root package or anywhere else.
func TestStandardLibraryImportsKeepFingerprints(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	edit(t, dir, "deploy.cue", "import (", "import (\n\t\"strings\"\n\t\"list\"")
	edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`, `environments: staging: namespace: strings.ToLower("STAGING")`+"\n_n: list.Sum([1])")
	edit(t, dir, "deploy.cue", "releases: web: #module: webmodule", "releases: web: {#module: webmodule, metadata: name: strings.ToLower(\"WEB\")}")
	moves(t, dir, "web", "staging", func() { edit(t, dir, "shared/shared.cue", "s1", "s2") })
}

// Hidden fields and definitions under environments are never
// environments.
func TestHiddenEnvironmentFieldsAreNotEnvironments(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	edit(t, dir, "deploy.cue", `environments: staging: namespace: "staging"`,
		"environments: {\n\t_common: namespace: \"staging\"\n\t#Def: namespace: string\n\tstaging: _common\n}")
	p, err := load.ParseImports(t.Context(), dir, nil)
	assert.NilError(t, err)
	tree, err := fingerprint.Scan(t.Context(), p)
	assert.NilError(t, err)
	envs, ok := tree.Environments(t.Context())
	assert.Assert(t, ok)
	assert.DeepEqual(t, envs, []string{"prod", "staging"})
}

// Registry files are named by module and path, not where the cache is:
// two machines with different CUE_CACHE_DIR agree.
func TestFingerprintDoesNotDependOnTheCacheDirectory(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	in := fingerprint.Inputs{Environment: "prod"}
	t.Setenv("CUE_CACHE_DIR", t.TempDir())
	a := of(t, dir, "api", in)
	t.Setenv("CUE_CACHE_DIR", t.TempDir())
	b := of(t, dir, "api", in)
	assert.Equal(t, a, b)
}

// An embed that cannot be resolved means no fingerprint, decided before
// any is returned.
func TestUnresolvableEmbedIsUnsure(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	edit(t, dir, "web/web.cue", "package web", "@extern(embed)\n\npackage web")
	edit(t, dir, "web/web.cue", "core.#Module\n", "core.#Module\nembedded: _ @embed(file=\"missing.json\")\n")
	p, err := load.ParseImports(t.Context(), dir, nil)
	assert.NilError(t, err)
	tree, err := fingerprint.Scan(t.Context(), p)
	assert.NilError(t, err)
	_, err = tree.Of(t.Context(), "web", fingerprint.Inputs{Environment: "staging"})
	assert.Assert(t, errors.Is(err, fingerprint.ErrUnsure), "%v", err)
	_, err = tree.Of(t.Context(), "api", fingerprint.Inputs{Environment: "staging"})
	assert.NilError(t, err, "a release that does not import the package keeps its fingerprint")
}

func write(t *testing.T, dir, file, content string) {
	t.Helper()
	p := filepath.Join(dir, file)
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
}

// The evaluated environments are cached by what their evaluation reads:
// a hit gives the same fingerprint, a corrupt entry is a miss (never an
// error or a wrong answer), and a change to a values file declaration
// misses.
func TestEnvironmentCacheIsVerifiedOnRead(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir, cache := fixture(t), t.TempDir()
	in := fingerprint.Inputs{Environment: "prod"}
	cached := func() string {
		t.Helper()
		p, err := load.ParseImports(t.Context(), dir, nil)
		assert.NilError(t, err)
		tree, err := fingerprint.Scan(t.Context(), p)
		assert.NilError(t, err)
		tree.UseCache(opmcache.Open(cache, 0, nil))
		fp, err := tree.Of(t.Context(), "web", in)
		assert.NilError(t, err)
		return fp
	}
	cold := cached()
	entries, err := filepath.Glob(filepath.Join(cache, "*", "*"))
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1)
	assert.Equal(t, cached(), cold, "a hit")
	assert.Equal(t, cold, of(t, dir, "web", in), "the cache changes nothing")

	// Tampered: the entry says prod reads no values file.
	b, err := os.ReadFile(entries[0])
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(entries[0], []byte(strings.Replace(string(b), `"secrets/prod.yaml"`, ``, 1)), 0o644))
	assert.Equal(t, cached(), cold, "a corrupt entry is a miss")
	assert.NilError(t, os.WriteFile(entries[0], b[:len(b)/2], 0o644))
	assert.Equal(t, cached(), cold, "a truncated entry is a miss")

	edit(t, dir, "deploy.cue", `valuesFiles: ["secrets/prod.yaml"]`, `valuesFiles: ["secrets/prod.yaml", "secrets/more.yaml"]`)
	write(t, dir, "secrets/more.yaml", "tier: gold\n")
	assert.Assert(t, cached() != cold)
}

// Verify names a file a render read that the fingerprint did not cover,
// and passes what it did cover.
func TestVerifyNamesAnUncoveredRead(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	p, err := load.ParseImports(t.Context(), dir, nil)
	assert.NilError(t, err)
	tree, err := fingerprint.Scan(t.Context(), p)
	assert.NilError(t, err)
	in := fingerprint.Inputs{Environment: "prod"}
	covered := []string{filepath.Join(dir, "deploy.cue"), filepath.Join(dir, "web", "web.cue"), filepath.Join(dir, "secrets", "prod.yaml"), filepath.Join(dir, "cue.mod", "module.cue")}
	assert.NilError(t, tree.Verify(t.Context(), []string{"web"}, in, covered))
	err = tree.Verify(t.Context(), []string{"web"}, in, append(covered, filepath.Join(dir, "api", "api.cue")))
	assert.ErrorContains(t, err, filepath.Join(dir, "api", "api.cue"))
	assert.NilError(t, tree.Verify(t.Context(), []string{"web", "api"}, in, append(covered, filepath.Join(dir, "api", "api.cue"))))
}

// A let only a release uses leaves the root invalid once releases are
// pruned (CUE refuses an unreferenced let): the environments are then
// evaluated from the whole root, and fingerprints stay (found by
// FuzzSkipsAreSound).
func TestLetUsedOnlyByAReleaseKeepsFingerprints(t *testing.T) {
	deploytest.Registry(t, lib("v0.1.0", "hello"))
	dir := fixture(t)
	edit(t, dir, "deploy.cue", "releases: web: #module: webmodule", "let level = \"gold\"\nreleases: web: {#module: webmodule, values: tier: level}")
	moves(t, dir, "web", "prod", func() { edit(t, dir, "secrets/prod.yaml", "gold", "platinum") })
}
