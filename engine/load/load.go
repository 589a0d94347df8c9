// Package load reads a deployment directory — a CUE module whose root
// package declares `environments` and `releases` — into CUE values, serving
// the pipeline's own catalog (catalog.ModulePath at catalog.Version) from
// the binary so no registry or network is needed for it. Every other
// dependency, opmodel.dev/* included, resolves through CUE_REGISTRY and the
// cache exactly as the cue command does; one that cannot be fetched is an
// error naming it, never replaced by embedded content.
//
// cue/load reads the files through loaderFS (load.Config.FS): the host's
// files with the overlay on top, each directory listed once per load,
// where cue/load would list a directory once per package under it.
package load

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"

	"github.com/opmodel/pipeline/catalog"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/reads"
)

// Deployment is a loaded deployment directory.
type Deployment struct {
	// Dir is the directory's absolute path.
	Dir string
	// ModulePath is the deployment's CUE module path (cue.mod/module.cue).
	ModulePath string
	// Root is the root package: it holds environments and releases.
	Root cue.Value
	// Catalog is the catalog package (catalog.ModulePath).
	Catalog cue.Value
	// Context owns both values; everything rendered from them must use it.
	Context *cue.Context

	// RelaxedClosedness: evaluated with LoadWith's option of that name.
	RelaxedClosedness bool
	// Overlay is LoadWith's option of that name, for loading again.
	Overlay map[string][]byte

	// files are the root package's parsed files (for DeclPos).
	files []*ast.File
	// parsed is what the load read, for a Memo to record it again.
	parsed *Parsed
}

// Options change how a deployment is evaluated.
type Options struct {
	// RelaxedClosedness evaluates with definition closedness off
	// (CUE_DEBUG=opendef). Only engine/render's workaround for CUE v0.17's
	// blueprint regression uses it, after checking every field the strict
	// evaluation refused against the blueprint's schema.
	RelaxedClosedness bool
	// Overlay replaces or adds files (absolute path → content) as CUE's
	// loader reads them: engine/fingerprint.PrunedRoot's root package
	// without the releases nobody selected (same positions), or a review
	// base's CUE files read from git's object store, never written out.
	// Files read outside the loader (values files) must be on disk.
	Overlay map[string][]byte
	// Pruned replaces root package files on top of Overlay with
	// engine/fingerprint.PrunedRoot's version: an optimisation, so when
	// the pruned root does not build (a let only the removed releases
	// used is then unreferenced), the load is done again without it.
	Pruned map[string][]byte
	// Reads, when set, records every file the load resolved: the module
	// file, each file of every package built and what @embed pulls in
	// (engine/reads, the fingerprint's safety net).
	Reads *reads.Set
	// Edit, when set, evaluates one package the root imports with its
	// files changed: called with the root package as parsed, it returns
	// that package's import path and the change (made to its files parsed
	// again, as BuildPackage's edit is), or "" to change nothing. Only
	// the evaluation sees the change: the deployment's RootPackage and
	// BuildPackage read the files as written. A Memo never keeps such a
	// load.
	Edit func(root *build.Instance) (importPath string, edit func([]*ast.File) ([]*ast.File, error))
}

// Load reads the deployment directory dir. Errors are classified as
// validation errors and carry CUE positions (file:line:col).
func Load(ctx context.Context, dir string) (*Deployment, error) {
	return LoadWith(ctx, dir, Options{})
}

// Parsed is a deployment directory as cue/load reads it: every file of
// the root package and of the packages it imports (the catalog and
// registry modules included) parsed and resolved, nothing evaluated.
// engine/fingerprint hashes it; LoadWith evaluates it.
type Parsed struct {
	// Dir is the directory's absolute path.
	Dir string
	// Root is the root package, Catalog the catalog package.
	Root, Catalog *build.Instance
	// Overlay is the overlay the directory was parsed with (see
	// Options.Overlay), for evaluating it again.
	Overlay map[string][]byte
	// sources are the bytes of files that are not on disk as read: the
	// embedded catalog, the module file with the catalog pinned, and
	// the overlay.
	sources map[string][]byte
	// files is the host's file system with sources on top, rooted at
	// "/": what @embed globs are resolved in, as the loader resolves them.
	files func() fs.FS
	// host reads the host's files (the command's Files).
	host *Files
}

// Source returns the bytes cue/load read for filename, or for any other
// file the bytes the deployment as parsed holds: the overlay's (a review's
// base read from git), else the host's.
func (p *Parsed) Source(filename string) ([]byte, error) {
	if b, ok := p.sources[filename]; ok {
		return b, nil
	}
	return p.host.ReadFile(filename)
}

// Files is what the parse read the host's files through.
func (p *Parsed) Files() *Files { return p.host }

// ParseImports reads and parses the deployment directory dir without
// evaluating it (errors are validation errors with CUE positions), with the files of every imported package parsed
// only up to their imports (the package clause and import declarations):
// enough to know the import graph and each package's files, which is all
// a fingerprint needs of them, at a fraction of the cost. The root
// package's files are parsed whole. overlay is Options.Overlay.
func ParseImports(ctx context.Context, dir string, overlay map[string][]byte) (*Parsed, error) {
	return parse(ctx, dir, overlay, true)
}

// enclosingModule is the nearest parent of dir holding cue.mod/module.cue,
// "" when none does.
// vendors reports whether the module at abs holds packages in cue.mod's
// pkg, usr or gen directories.
func vendors(abs string) bool {
	for _, d := range []string{"pkg", "usr", "gen"} {
		if st, err := os.Stat(filepath.Join(abs, "cue.mod", d)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

func enclosingModule(dir string) string {
	for p := filepath.Dir(dir); p != dir; dir, p = p, filepath.Dir(p) {
		if _, err := os.Stat(filepath.Join(p, "cue.mod", "module.cue")); err == nil {
			return p
		}
	}
	return ""
}

func parse(ctx context.Context, dir string, rootOverlay map[string][]byte, importsOnly bool) (*Parsed, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fault.Validationf("deployment directory %q: %v", dir, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, fault.Validationf("deployment directory %q does not exist or is not a directory: pass the directory that holds cue.mod/ (for example: opm render examples)", dir)
	}
	modFile := filepath.Join(abs, "cue.mod", "module.cue")
	if _, err := os.Stat(modFile); err != nil {
		if root := enclosingModule(abs); root != "" {
			return nil, fault.Validationf("%s is not a deployment directory, but it is inside one: %s (it holds cue.mod/); pass that directory instead (for example: opm render %s)", dir, root, root)
		}
		return nil, fault.Validationf("%s is not a CUE module: %s is missing; start a deployment directory with `opm init %s`, or pass the directory that holds cue.mod/", dir, modFile, dir)
	}
	reg, err := newRegistry(os.Environ())
	if err != nil {
		return nil, err
	}
	sources := map[string][]byte{}
	if err := catalogSources(sources); err != nil {
		return nil, fmt.Errorf("preparing the embedded catalog: %w", err)
	}
	pinned, err := pinCatalog(modFile)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading %s: %w", modFile, err))
	}
	sources[modFile] = pinned
	for name, b := range rootOverlay {
		sources[name] = b
	}
	cfg := &load.Config{Dir: abs, ModuleRoot: abs, Registry: reg}
	host := FilesOf(ctx)
	if runtime.GOOS == "windows" || vendors(abs) {
		// load.Config.FS names files by slash paths from one root, which
		// a drive letter is not, and cue/load cannot place the packages
		// vendored in cue.mod/pkg, usr or gen when files come from an FS
		// ("cannot get absolute path for FS"): those keep CUE's own
		// overlay, and list directories as often as cue/load asks.
		cfg.Overlay = make(map[string]load.Source, len(sources))
		for name, b := range sources {
			cfg.Overlay[name] = load.FromBytes(b)
		}
	} else {
		cfg.FS = newLoaderFS(sources, host)
	}
	if importsOnly {
		cfg.ParseFile = func(name string, src any, pc parser.Config) (*ast.File, error) {
			if filepath.Dir(name) == abs {
				return parser.ParseFile(name, src, pc)
			}
			return parser.ParseFile(name, src, pc, parser.ImportsOnly)
		}
	}
	insts := load.Instances([]string{".", catalog.ModulePath}, cfg)
	for _, inst := range insts {
		if inst.Err != nil {
			return nil, fault.Wrap(fault.Validation, fmt.Errorf("loading %s:\n%s", dir, describeLoad(dir, inst.Err)))
		}
	}
	if len(insts) != 2 {
		return nil, fmt.Errorf("loading %s: expected 2 instances, got %d", dir, len(insts))
	}
	files := sync.OnceValue(func() fs.FS { return newLoaderFS(sources, host) })
	return &Parsed{Dir: abs, Root: insts[0], Catalog: insts[1], Overlay: rootOverlay, sources: sources, files: files, host: host}, nil
}

// LoadWith is Load with evaluation options.
func LoadWith(ctx context.Context, dir string, opts Options) (*Deployment, error) {
	if opts.Pruned != nil {
		pruned := opts
		pruned.Overlay, pruned.Pruned = maps.Clone(opts.Overlay), nil
		if pruned.Overlay == nil {
			pruned.Overlay = map[string][]byte{}
		}
		maps.Copy(pruned.Overlay, opts.Pruned)
		if d, err := LoadWith(ctx, dir, pruned); err == nil {
			return d, nil
		}
		opts.Pruned = nil
	}
	p, err := parse(ctx, dir, opts.Overlay, false)
	if err != nil {
		return nil, err
	}
	if opts.Reads != nil {
		if err := p.record(opts.Reads); err != nil {
			return nil, err
		}
	}
	return evaluate(dir, p, opts)
}

// evaluate builds what parse read in a CUE context of its own; dir names
// the directory in errors.
func evaluate(dir string, p *Parsed, opts Options) (*Deployment, error) {
	abs, insts := p.Dir, []*build.Instance{p.Root, p.Catalog}
	if opts.Edit != nil {
		root, err := p.edited(opts.Edit)
		if err != nil {
			return nil, err
		}
		insts[0] = root
	}
	cctx := cuecontext.New()
	if opts.RelaxedClosedness {
		cctx = cuecontext.New(cuecontext.CUE_DEBUG("opendef"))
	}
	vals, err := cctx.BuildInstances(insts)
	if err != nil {
		msg := Describe(err)
		if hints := shadowedImports(insts, err); len(hints) > 0 {
			msg = strings.Join(hints, "\n") + "\n  CUE says:\n" + msg
		}
		if hints := streamedEmbeds(err); len(hints) > 0 {
			msg += "\n" + strings.Join(hints, "\n")
		}
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("evaluating %s:\n%s", dir, msg))
	}
	d := &Deployment{Dir: abs, ModulePath: modulePath(p.Root), Root: vals[0], Catalog: vals[1], Context: cctx, RelaxedClosedness: opts.RelaxedClosedness, Overlay: opts.Overlay, files: insts[0].Files, parsed: p}
	if !d.Root.LookupPath(cue.ParsePath("releases")).Exists() {
		return nil, fault.Validationf("%s: the root package declares no `releases`; declare `releases: [Name=string]: core.#ModuleRelease` and at least one release", dir)
	}
	return d, nil
}

// Built is one package a deployment's load parsed, built beside the
// catalog in a CUE context of its own.
type Built struct {
	Context          *cue.Context
	Package, Catalog cue.Value
}

// RootPackage is the root package as d's load parsed it (its files and
// imports), nil for a deployment not loaded from a directory.
func (d *Deployment) RootPackage() *build.Instance {
	if d.parsed == nil {
		return nil
	}
	return d.parsed.Root
}

// BuildPackage builds inst, a package d's load parsed (a module the
// deployment imports), beside the catalog in a CUE context of its own and
// with d's closedness: a goroutine that must not touch d's values (a
// context is for one goroutine at a time) evaluates part of the deployment
// without evaluating the rest. The package's files are parsed again from
// the bytes the load read, so edit (when not nil) may change them in
// place, and return them with files of its own added: the parse's nodes
// are shared with d and stay as they are.
func (d *Deployment) BuildPackage(inst *build.Instance, edit func([]*ast.File) ([]*ast.File, error)) (Built, error) {
	pkg, err := d.reparsed(inst, edit)
	if err != nil {
		return Built{}, err
	}
	cctx := cuecontext.New()
	if d.RelaxedClosedness {
		cctx = cuecontext.New(cuecontext.CUE_DEBUG("opendef"))
	}
	vals, err := cctx.BuildInstances([]*build.Instance{pkg, d.parsed.Catalog})
	if err != nil {
		return Built{}, fmt.Errorf("building %s: %w", inst.ImportPath, err)
	}
	return Built{Context: cctx, Package: vals[0], Catalog: vals[1]}, nil
}

// BuildPackageIn builds inst as BuildPackage does, but in the context of
// an earlier build (b), whose catalog it then shares: a goroutine that
// evaluates the package a second time (with other values) builds the
// catalog once.
func (d *Deployment) BuildPackageIn(b Built, inst *build.Instance, edit func([]*ast.File) ([]*ast.File, error)) (Built, error) {
	pkg, err := d.reparsed(inst, edit)
	if err != nil {
		return Built{}, err
	}
	vals, err := b.Context.BuildInstances([]*build.Instance{pkg})
	if err != nil {
		return Built{}, fmt.Errorf("building %s: %w", inst.ImportPath, err)
	}
	return Built{Context: b.Context, Package: vals[0], Catalog: b.Catalog}, nil
}

// reparsed is inst as d's load parsed it, parsed again and edited
// (Parsed.reparsed).
func (d *Deployment) reparsed(inst *build.Instance, edit func([]*ast.File) ([]*ast.File, error)) (*build.Instance, error) {
	if d.parsed == nil {
		return nil, errors.New("the deployment was not loaded from a directory")
	}
	return d.parsed.reparsed(inst, edit)
}

func modulePath(inst *build.Instance) string { return inst.Module }

// reparsed is inst with its files parsed again from the bytes the load
// read and changed by edit (when not nil): the load's own nodes are shared
// with its deployment and stay as they are.
func (p *Parsed) reparsed(inst *build.Instance, edit func([]*ast.File) ([]*ast.File, error)) (*build.Instance, error) {
	cfg := parser.NewConfig(parser.ParseComments)
	if inst.ModuleFile != nil && inst.ModuleFile.Language != nil {
		cfg = cfg.Apply(parser.Version(inst.ModuleFile.Language.Version))
	}
	files := make([]*ast.File, 0, len(inst.Files))
	for _, f := range inst.Files {
		src, err := p.Source(f.Filename)
		if err != nil {
			return nil, fmt.Errorf("reading %s again: %w", f.Filename, err)
		}
		pf, err := parser.ParseFile(f.Filename, src, cfg)
		if err != nil {
			return nil, fmt.Errorf("parsing %s again: %w", f.Filename, err)
		}
		files = append(files, pf)
	}
	if edit != nil {
		var err error
		if files, err = edit(files); err != nil {
			return nil, err
		}
	}
	out := *inst
	out.Files = files
	return &out, nil
}

// edited is the root package importing, in place of the package edit
// names, that package with its files changed (Options.Edit); the root
// itself when edit names none.
func (p *Parsed) edited(edit func(*build.Instance) (string, func([]*ast.File) ([]*ast.File, error))) (*build.Instance, error) {
	path, change := edit(p.Root)
	if path == "" {
		return p.Root, nil
	}
	i := slices.IndexFunc(p.Root.Imports, func(inst *build.Instance) bool { return inst.ImportPath == path })
	if i < 0 {
		return nil, fmt.Errorf("the root package imports no package %s", path)
	}
	pkg, err := p.reparsed(p.Root.Imports[i], change)
	if err != nil {
		return nil, err
	}
	root := *p.Root
	root.Imports = slices.Clone(p.Root.Imports)
	root.Imports[i] = pkg
	return &root, nil
}

// FieldNames lists a struct's regular field names, sorted (the keys of
// `releases` or `environments`); nothing for a value that does not exist.
func FieldNames(v cue.Value) ([]string, error) {
	if !v.Exists() {
		return nil, nil
	}
	it, err := v.Fields()
	if err != nil {
		return nil, err
	}
	var names []string
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	slices.Sort(names)
	return names, nil
}

// Imported returns the package importPath as this deployment's load
// resolved it (at the version its module graph picked), built in
// d.Context; ok is false when nothing the deployment loads imports it.
// OPM v2 releases take core@v2's #ModuleInstance from the same core their
// modules were written with.
func (d *Deployment) Imported(importPath string) (v cue.Value, ok bool) {
	if d.parsed == nil {
		return cue.Value{}, false
	}
	seen := map[*build.Instance]bool{}
	queue := []*build.Instance{d.parsed.Root}
	for len(queue) > 0 {
		inst := queue[0]
		queue = queue[1:]
		if inst == nil || seen[inst] {
			continue
		}
		seen[inst] = true
		if inst.ImportPath == importPath {
			v := d.Context.BuildInstance(inst)
			return v, v.Err() == nil
		}
		queue = append(queue, inst.Imports...)
	}
	return cue.Value{}, false
}
