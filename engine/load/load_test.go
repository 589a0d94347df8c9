package load_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"cuelang.org/go/cue"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/internal/deploytest"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func TestCatalogLoadsWithoutDeclaringIt(t *testing.T) {
	dir := t.TempDir()
	// No deps in module.cue and CUE_REGISTRY pointing nowhere: the catalog
	// must still come from the binary.
	t.Setenv("CUE_REGISTRY", "127.0.0.1:1")
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"d.cue":              "package d\n\nimport core \"github.com/opmodel/pipeline/catalog@v0\"\n\nreleases: {}\nx: core.#UUIDType & \"99de2ec2-c695-5c51-88d5-ad054b1447d1\"\n",
	})
	d, err := load.Load(t.Context(), dir)
	assert.NilError(t, err)
	s, err := d.Root.LookupPath(cue.ParsePath("x")).String()
	assert.NilError(t, err)
	assert.Equal(t, s, "99de2ec2-c695-5c51-88d5-ad054b1447d1")
	assert.Check(t, d.Catalog.LookupPath(cue.ParsePath("#KubernetesProvider")).Exists())
	assert.Equal(t, d.ModulePath, "example.com/d@v0")
}

// Any other dependency goes to CUE's own registry client, configured by
// CUE_REGISTRY: here a local address that refuses connections.
func TestOtherDependenciesUseCUERegistry(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	addr := l.Addr().String()
	assert.NilError(t, l.Close()) // nothing listens there now
	t.Setenv("CUE_REGISTRY", addr+"+insecure")
	t.Setenv("CUE_CACHE_DIR", t.TempDir())

	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: \"example.com/other@v0\": v: \"v0.1.0\"\n",
		"d.cue":              "package d\n\nimport \"example.com/other\"\n\nreleases: {}\nx: other.y\n",
	})
	_, err = load.Load(t.Context(), dir)
	assert.Assert(t, err != nil)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), addr), "the fetch went to the CUE_REGISTRY host")
}

func TestNotACUEModule(t *testing.T) {
	_, err := load.Load(t.Context(), t.TempDir())
	assert.ErrorContains(t, err, "cue.mod")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
}

// realCore is a stand-in for OPM's opmodel.dev/core at a version the
// embedded catalog never had, with a definition only it has.
var realCore = deploytest.Module{
	Path: "opmodel.dev/core@v0", Version: "v0.9.0",
	Files: map[string]string{"core.cue": "package core\n\n#OnlyInTheRegistry: \"served by the registry\"\n"},
}

const pinsRealCore = "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: \"opmodel.dev/core@v0\": v: \"v0.9.0\"\n"

// A deployment that pins opmodel.dev/core gets that module from the
// registry, never the embedded catalog (which no longer answers for it).
func TestOPMCoreComesFromTheRegistry(t *testing.T) {
	deploytest.Registry(t, realCore)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": pinsRealCore,
		"d.cue":              "package d\n\nimport core \"opmodel.dev/core@v0\"\n\nreleases: {}\nx: core.#OnlyInTheRegistry\n",
	})
	d, err := load.Load(t.Context(), dir)
	assert.NilError(t, err)
	s, err := d.Root.LookupPath(cue.ParsePath("x")).String()
	assert.NilError(t, err)
	assert.Equal(t, s, "served by the registry")
}

// Importing opmodel.dev/core without declaring it is not quietly answered
// from the binary.
func TestUndeclaredOPMCoreIsNotEmbedded(t *testing.T) {
	deploytest.Registry(t)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"d.cue":              "package d\n\nimport core \"opmodel.dev/core@v0\"\n\nreleases: {}\nx: core.#Module\n",
	})
	_, err := load.Load(t.Context(), dir)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, "opmodel.dev/core@v0")
}

// With the registry stopped and an empty cache, the error names the
// missing module@version and CUE_REGISTRY, and is a validation error.
func TestUnfetchableDependencyNamesModuleAndRegistry(t *testing.T) {
	reg := deploytest.Registry(t, realCore)
	reg.Close()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": pinsRealCore,
		"d.cue":              "package d\n\nimport core \"opmodel.dev/core@v0\"\n\nreleases: {}\nx: core.#OnlyInTheRegistry\n",
	})
	_, err := load.Load(t.Context(), dir)
	assert.Assert(t, err != nil)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), "opmodel.dev/core@v0.9.0"))
	assert.Check(t, is.Contains(err.Error(), "CUE_REGISTRY="+reg.Host()))
}

// A version of the catalog's own path other than the embedded one is a
// dependency like any other: fetched, not replaced by the binary's copy.
func TestOtherCatalogVersionIsFetched(t *testing.T) {
	deploytest.Registry(t, deploytest.Module{
		Path: "github.com/opmodel/pipeline/catalog@v0", Version: "v0.99.0",
		Files: map[string]string{"c.cue": "package catalog\n\n#Marker: \"v0.99.0 from the registry\"\n"},
	})
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: \"github.com/opmodel/pipeline/catalog@v0\": v: \"v0.99.0\"\n",
		"d.cue":              "package d\n\nimport core \"github.com/opmodel/pipeline/catalog@v0\"\n\nreleases: {}\nx: core.#Marker\n",
	})
	d, err := load.Load(t.Context(), dir)
	assert.NilError(t, err)
	s, err := d.Root.LookupPath(cue.ParsePath("x")).String()
	assert.NilError(t, err)
	assert.Equal(t, s, "v0.99.0 from the registry")
}

// Packages vendored in cue.mod/pkg and cue.mod/usr load as plain cue/load
// loads them, also with an overlay (a review's base read from git).
func TestVendoredPackagesLoad(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue":                     "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"cue.mod/pkg/example.com/vend/v.cue":     "package vend\n\nreplicas: 2\n",
		"cue.mod/usr/example.com/vend/extra.cue": "package vend\n\nreplicas: int\n",
		"d.cue":                                  "package d\n\nimport \"example.com/vend\"\n\nreleases: {}\nx: vend.replicas\n",
	})
	d, err := load.Load(t.Context(), dir)
	assert.NilError(t, err)
	n, err := d.Root.LookupPath(cue.ParsePath("x")).Int64()
	assert.NilError(t, err)
	assert.Equal(t, n, int64(2))

	overlay := map[string][]byte{filepath.Join(dir, "d.cue"): []byte("package d\n\nimport \"example.com/vend\"\n\nreleases: {}\nx: vend.replicas + 1\n")}
	d, err = load.LoadWith(t.Context(), dir, load.Options{Overlay: overlay})
	assert.NilError(t, err)
	n, err = d.Root.LookupPath(cue.ParsePath("x")).Int64()
	assert.NilError(t, err)
	assert.Equal(t, n, int64(3))
}
