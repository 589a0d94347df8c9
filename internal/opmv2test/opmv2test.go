// Package opmv2test serves upstream OPM's v2 reference material
// (../shared/opm-v2: core@v2, the k8s schema stub, catalogs/opm@v2 and 20
// modules) from an in-memory CUE registry on loopback, for tests that render
// the modules OPM users write today. Nothing of it is copied into the
// project: the files are read where shared/ keeps them.
package opmv2test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/modregistrytest"
)

// Dir is ../shared/opm-v2 beside the repository (where the CI run and the
// developers' machines keep shared/). A test that needs it fails without it.
func Dir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		_, mod := os.Stat(filepath.Join(d, "go.mod"))
		_, cat := os.Stat(filepath.Join(d, "catalog"))
		if mod == nil && cat == nil {
			p := filepath.Join(d, "..", "shared", "opm-v2")
			if _, err := os.Stat(filepath.Join(p, "reg")); err != nil {
				if os.Getenv("GITHUB_ACTIONS") == "true" {
					// The material is assembled where the project's own CI
					// runs (shared/ beside the clone) and is not published.
					t.Skipf("upstream OPM v2 reference material (shared/opm-v2) is not available on GitHub's runners; the project's CI (.ci/run) runs this test")
				}
				t.Fatalf("upstream OPM v2 reference material not found at %s (shared/ beside the repository): %v", p, err)
			}
			return p
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no repository root above %s", wd)
		}
	}
}

// Module is one module of the reference set.
type Module struct {
	// Dir is its directory name under reg/modules (web_app).
	Dir string
	// Path is its module path (opmodel.dev/modules/web_app@v1), Version
	// its published version without "v" (1.0.1).
	Path, Version string
}

// Modules lists the reference modules.
func Modules(t testing.TB) []Module {
	t.Helper()
	root := filepath.Join(Dir(t), "reg", "modules")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []Module
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, e.Name(), "cue.mod", "module.cue")); err != nil {
			continue
		}
		path, version := identity(t, filepath.Join(root, e.Name()))
		out = append(out, Module{Dir: e.Name(), Path: path, Version: version})
	}
	return out
}

var (
	modulePathRE = regexp.MustCompile(`(?m)^ModulePath:\s*"([^"]+)"`)
	versionRE    = regexp.MustCompile(`(?m)^Version:\s*(?:#VersionType\s*\|\s*\*)?"([^"]+)"`)
)

// identity reads a module's identity package: its path and version (a
// default counts, as `cue mod publish` of that version would).
func identity(t testing.TB, dir string) (path, version string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "identity", "*.cue"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := modulePathRE.FindSubmatch(b); m != nil {
			path = string(m[1])
		}
		if m := versionRE.FindSubmatch(b); m != nil {
			version = string(m[1])
		}
	}
	if path == "" || version == "" {
		t.Fatalf("%s: no ModulePath or Version in its identity package", dir)
	}
	return path, version
}

// Patch publishes a reference module once more, at Version, with one
// file's text replaced: how a test applies a module whose published
// objects the API server refuses, fixed as its author would fix it.
type Patch struct {
	// Dir is the module's directory under reg/modules (gotify).
	Dir, Version string
	// File is a path inside the module; Old must occur in it once.
	File, Old, New string
}

// Registry serves the reference modules from a CUE registry on loopback
// and points CUE_REGISTRY (and a fresh CUE_CACHE_DIR) at it for t:
// opmodel.dev/core@v2 at v2.0.0-alpha.4 and alpha.5, cue.dev/x/k8s.io@v0
// v0.7.0 (a stub), opmodel.dev/catalogs/opm@v2 v2.0.0-alpha.4, every
// module at its identity version, and the patched versions asked for. It
// returns the registry's host.
func Registry(t *testing.T, patches ...Patch) string {
	t.Helper()
	root := filepath.Join(Dir(t), "reg")
	fsys := fstest.MapFS{}
	add := func(src, version string, patches ...Patch) {
		t.Helper()
		mf, err := os.ReadFile(filepath.Join(src, "cue.mod", "module.cue"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(mf, "module.cue")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		prefix := strings.ReplaceAll(f.ModuleRootPath(), "/", "_") + "_v" + version
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, p := range patches {
				if p.File != filepath.ToSlash(rel) {
					continue
				}
				if strings.Count(string(b), p.Old) != 1 {
					t.Fatalf("patching %s of %s: %q does not occur once", p.File, p.Dir, p.Old)
				}
				b = []byte(strings.Replace(string(b), p.Old, p.New, 1))
			}
			fsys[prefix+"/"+filepath.ToSlash(rel)] = &fstest.MapFile{Data: b, Mode: 0o644}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(filepath.Join(root, "core"), "2.0.0-alpha.4")
	add(filepath.Join(root, "core"), "2.0.0-alpha.5")
	add(filepath.Join(root, "k8s"), "0.7.0")
	add(filepath.Join(root, "catalog_opm"), "2.0.0-alpha.4")
	for _, m := range Modules(t) {
		add(filepath.Join(root, "modules", m.Dir), m.Version)
	}
	for _, p := range patches {
		add(filepath.Join(root, "modules", p.Dir), p.Version, p)
	}
	reg, err := modregistrytest.New(fsys, "")
	if err != nil {
		t.Fatalf("serving the OPM v2 reference modules: %v", err)
	}
	t.Cleanup(reg.Close)
	t.Setenv("CUE_REGISTRY", reg.Host()+"+insecure")
	t.Setenv("CUE_CACHE_DIR", t.TempDir())
	return reg.Host()
}
