package load

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/inject/embed"
	"cuelang.org/go/cue/parser"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/reads"
)

// Closure is every package insts reach, themselves included, each once,
// sorted by import path: what the loader resolved, local and registry
// packages and the catalog alike (the standard library is part of CUE,
// not a package the loader reads).
func Closure(insts ...*build.Instance) []*build.Instance {
	seen := map[string]bool{}
	var out []*build.Instance
	var walk func(inst *build.Instance)
	walk = func(inst *build.Instance) {
		if inst == nil || seen[inst.ImportPath] {
			return
		}
		seen[inst.ImportPath] = true
		out = append(out, inst)
		for _, imp := range inst.Imports {
			walk(imp)
		}
	}
	for _, inst := range insts {
		walk(inst)
	}
	slices.SortFunc(out, func(a, b *build.Instance) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return out
}

// ModuleFile is the path of the deployment's module file.
func (p *Parsed) ModuleFile() string { return filepath.Join(p.Dir, "cue.mod", "module.cue") }

// record adds every file the load resolved to r.
func (p *Parsed) record(r *reads.Set) error {
	r.Add(p.ModuleFile())
	for _, inst := range Closure(p.Root, p.Catalog) {
		for _, bf := range inst.BuildFiles {
			r.Add(bf.Filename)
			src, err := p.Source(bf.Filename)
			if err != nil {
				return fault.Wrap(fault.Validation, fmt.Errorf("reading %s: %w", bf.Filename, err))
			}
			files, err := p.EmbeddedFiles(bf.Filename, src)
			if err != nil {
				continue // the evaluation reports it
			}
			for _, f := range files {
				r.Add(f)
			}
		}
	}
	return nil
}

// EmbeddedFiles returns the files the @embed attributes of the CUE file
// filename (whose content is src) pull in, by absolute path, sorted: what
// CUE's embed injection will read when the file is evaluated. A file
// without @embed pulls in nothing; one whose attributes cannot be
// resolved (a missing file, a bad glob) is an error.
func (p *Parsed) EmbeddedFiles(filename string, src []byte) ([]string, error) {
	if !bytes.Contains(src, []byte("@embed")) {
		return nil, nil
	}
	f, err := parser.ParseFile(filename, src)
	if err != nil {
		return nil, fmt.Errorf("parsing %s for @embed: %w", filename, err)
	}
	dir := filepath.Dir(filename)
	embeds, errs := embed.EmbeddedPaths(filepath.Base(filename), f)
	if errs != nil {
		return nil, fmt.Errorf("%s: %w", filename, errs)
	}
	// In the deployment as parsed, overlay included: a glob over a
	// base read from git matches the commit's files, not the disk's.
	fsys := fs.FS(os.DirFS(dir))
	if runtime.GOOS != "windows" && p.files != nil {
		sub, err := fs.Sub(p.files(), strings.TrimPrefix(filepath.ToSlash(dir), "/"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filename, err)
		}
		fsys = sub
	}
	var out []string
	for _, e := range embeds {
		found, err := e.FindAll(fsys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filename, err)
		}
		for _, rel := range found {
			out = append(out, filepath.Join(dir, filepath.FromSlash(rel)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Environments evaluates the `environments` of the deployment directory
// dir and nothing else: the root package is read through overlay, which
// the caller prunes of every release (engine/fingerprint), so only what
// the environments reach is built. It is what lets a fingerprint take an
// environment's valuesFiles from the evaluator rather than from syntax.
func Environments(ctx context.Context, dir string, overlay map[string][]byte) (cue.Value, error) {
	p, err := parse(ctx, dir, overlay, false)
	if err != nil {
		return cue.Value{}, err
	}
	v := cuecontext.New().BuildInstance(p.Root)
	if err := v.Err(); err != nil {
		return cue.Value{}, fault.Wrap(fault.Validation, fmt.Errorf("evaluating the environments of %s:\n%s", dir, Describe(err)))
	}
	return v.LookupPath(cue.ParsePath("environments")), nil
}
