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
		"d.cue":              "package d\n\nimport core \"opmodel.dev/core@v0\"\n\nreleases: {}\nx: core.#UUIDType & \"99de2ec2-c695-5c51-88d5-ad054b1447d1\"\n",
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
