package load

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"cuelang.org/go/mod/modconfig"
	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/module"

	"github.com/opmodel/pipeline/catalog"
)

// embeddedRoot is a synthetic absolute directory under which the catalog's
// files are placed in the loader's overlay. The loader reads a fetched
// module from disk at OSRoot()/Dir plus the overlay, so the catalog must
// appear to live at a real-looking absolute path (nothing is written there).
const embeddedRoot = EmbeddedRoot + catalog.ModulePath

// EmbeddedRoot prefixes the file name of every position inside the embedded
// catalog, so error messages can tell the catalog's lines from the user's.
const EmbeddedRoot = "/__opm_embedded__/"

// registry answers for the embedded catalog and hands every other module to
// CUE's own registry client, which honours CUE_REGISTRY, caches and logins.
type registry struct {
	catalogMod *modfile.File
	env        []string

	once     sync.Once
	fallback modconfig.Registry
	fallErr  error
}

func newRegistry(env []string) (*registry, error) {
	data, err := fs.ReadFile(catalog.FS(), "cue.mod/module.cue")
	if err != nil {
		return nil, fmt.Errorf("reading the embedded catalog's module.cue: %w", err)
	}
	mf, err := modfile.Parse(data, "cue.mod/module.cue")
	if err != nil {
		return nil, fmt.Errorf("parsing the embedded catalog's module.cue: %w", err)
	}
	return &registry{catalogMod: mf, env: env}, nil
}

// isCatalog reports whether mv is the embedded catalog: its path at exactly
// the embedded version. Any other version of that path, and every other
// module, is fetched as CUE would fetch it.
func (r *registry) isCatalog(mv module.Version) bool {
	return mv.Path() == catalog.ModulePath && mv.Version() == catalog.Version
}

// unfetchable names the module, the registry and what to do when a
// dependency cannot be fetched; nothing stands in for it.
func (r *registry) unfetchable(mv module.Version, err error) error {
	reg := "CUE_REGISTRY is not set, so the default registry (registry.cue.works) was asked"
	for _, kv := range r.env {
		if v, ok := strings.CutPrefix(kv, "CUE_REGISTRY="); ok && v != "" {
			reg = fmt.Sprintf("CUE_REGISTRY=%s", v)
		}
	}
	return fmt.Errorf("cannot fetch module %s (%s): %w; publish it there, point CUE_REGISTRY at a registry that has it, or warm the cache (CUE_CACHE_DIR) with `cue mod tidy` while online", mv, reg, err)
}

func (r *registry) other() (modconfig.Registry, error) {
	r.once.Do(func() {
		r.fallback, r.fallErr = modconfig.NewRegistry(&modconfig.Config{Env: r.env})
	})
	return r.fallback, r.fallErr
}

func (r *registry) ModFile(ctx context.Context, mv module.Version) (*modfile.File, error) {
	if r.isCatalog(mv) {
		return r.catalogMod, nil
	}
	o, err := r.other()
	if err != nil {
		return nil, err
	}
	mf, err := o.ModFile(ctx, mv)
	if err != nil {
		return nil, r.unfetchable(mv, err)
	}
	return mf, nil
}

func (r *registry) Fetch(ctx context.Context, mv module.Version) (module.SourceLoc, error) {
	if r.isCatalog(mv) {
		return module.SourceLoc{FS: osRootFS{fsys: catalog.FS(), root: embeddedRoot}, Dir: "."}, nil
	}
	o, err := r.other()
	if err != nil {
		return module.SourceLoc{}, err
	}
	loc, err := o.Fetch(ctx, mv)
	if err != nil {
		return module.SourceLoc{}, r.unfetchable(mv, err)
	}
	return loc, nil
}

func (r *registry) ModuleVersions(ctx context.Context, mpath string) ([]string, error) {
	if mpath == catalog.ModulePath {
		// Only consulted for undeclared imports; declared versions of
		// the path go through ModFile/Fetch above.
		return []string{catalog.Version}, nil
	}
	o, err := r.other()
	if err != nil {
		return nil, err
	}
	return o.ModuleVersions(ctx, mpath)
}

// osRootFS presents the embedded files as if rooted at an OS directory.
type osRootFS struct {
	fsys fs.FS
	root string
}

func (f osRootFS) Open(name string) (fs.File, error) { return f.fsys.Open(name) }
func (f osRootFS) OSRoot() string                    { return f.root }

// catalogSources places every embedded catalog file under embeddedRoot.
func catalogSources(sources map[string][]byte) error {
	return fs.WalkDir(catalog.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(catalog.FS(), p)
		if err != nil {
			return err
		}
		sources[path.Join(embeddedRoot, p)] = b
		return nil
	})
}

// pinCatalog returns the deployment's module.cue with the catalog declared
// as a dependency at the embedded version, unless the directory declares a
// version of it itself (which is then fetched like any other dependency).
// The loader only asks the registry for declared modules.
func pinCatalog(modFilePath string) ([]byte, error) {
	data, err := os.ReadFile(modFilePath)
	if err != nil {
		return nil, err
	}
	mf, err := modfile.ParseNonStrict(data, modFilePath)
	if err != nil {
		return nil, err
	}
	if mf.Deps == nil {
		mf.Deps = map[string]*modfile.Dep{}
	}
	if _, ok := mf.Deps[catalog.ModulePath]; !ok {
		mf.Deps[catalog.ModulePath] = &modfile.Dep{Version: catalog.Version}
	}
	return modfile.Format(mf)
}
