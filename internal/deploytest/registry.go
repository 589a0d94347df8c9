package deploytest

import (
	"strings"
	"testing"
	"testing/fstest"

	"cuelang.org/go/mod/modregistrytest"
)

// Module is one CUE module version to publish: its path with major version
// ("opmodel.dev/core@v0"), its version ("v0.9.0") and its files (path →
// content; cue.mod/module.cue is written from Path when missing).
type Module struct {
	Path, Version string
	Files         map[string]string
}

// Registry publishes modules to an in-memory OCI registry (ocimem behind
// CUE's test server), points CUE_REGISTRY at it and CUE_CACHE_DIR at a fresh
// directory for the rest of the test, and returns it; Close stops it.
func Registry(t testing.TB, mods ...Module) *modregistrytest.Registry {
	t.Helper()
	fsys := fstest.MapFS{}
	for _, m := range mods {
		// modregistrytest reads each module from a directory named
		// <module root path with / as _>_<version>.
		root, _, _ := strings.Cut(m.Path, "@")
		dir := strings.ReplaceAll(root, "/", "_") + "_" + m.Version
		files := map[string]string{"cue.mod/module.cue": "module: \"" + m.Path + "\"\nlanguage: version: \"v0.12.0\"\n"}
		for k, v := range m.Files {
			files[k] = v
		}
		for name, content := range files {
			fsys[dir+"/"+name] = &fstest.MapFile{Data: []byte(content)}
		}
	}
	reg, err := modregistrytest.New(fsys, "")
	if err != nil {
		t.Fatalf("starting the test registry: %v", err)
	}
	t.Cleanup(reg.Close)
	t.Setenv("CUE_REGISTRY", reg.Host()+"+insecure")
	t.Setenv("CUE_CACHE_DIR", t.TempDir())
	return reg
}
