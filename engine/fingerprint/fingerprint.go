// Package fingerprint computes a release's input fingerprint: one hash of
// everything its render in an environment reads, so equal fingerprints
// mean byte-identical renders and a caller may skip the render (Bazel's
// action key, for CUE).
//
// What a render reads is taken from what the loader and the evaluator
// resolved, not guessed from syntax. A fingerprint of release R in
// environment E covers:
//   - the renderer: the Go build ID of the running executable
//     (buildinfo.BuildID), so any change to opm's code, its dependencies
//     (CUE and its standard library among them) or the embedded catalog
//     moves every fingerprint;
//   - the deployment's module file without its deps (what a dependency
//     resolves to is covered below, by the content of every package of
//     the closure, so a pin bump moves only the releases whose closure it
//     changes) and every file of its root package;
//   - every file of every package in R's import closure as cue/load
//     resolved it (local packages, registry modules, the catalog), named
//     by import path and path inside the package — never by where the
//     registry cache happens to be — and hashed by content, plus every
//     file an @embed attribute of those files pulls in;
//   - the values files of E as the evaluator reads environments[E].valuesFiles
//     (the environments alone are evaluated, with every release pruned),
//     the -f files and in-memory values by content, R's key, E's name and
//     a namespace override.
//
// Which packages are R's is the one thing read from syntax: the imports
// the root package's shared declarations use, plus those R's own
// `releases: R: …` declarations use. Where the syntax cannot show that
// for certain — a release declared by a comprehension or under a dynamic
// label, a declaration that refers to `releases` or to another release —
// the package says so (ErrUnsure) and the caller renders. A fingerprint
// is never a guess, and engine/reads checks each render's actual reads
// against what the fingerprint covered (Verify).
package fingerprint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/mod/modfile"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/values"
)

// Prefix starts every fingerprint, naming its algorithm and format; a
// change to what a fingerprint covers changes it, so no fingerprint of
// an older opm ever equals a newer one.
const Prefix = "inputs-sha256-v2:"

// ErrUnsure is wrapped by every error that means "what this release reads
// cannot be determined without rendering it": not a failure, a reason to
// render.
var ErrUnsure = errors.New("the inputs cannot be determined without rendering")

// Input is one thing a fingerprint covered: its name (machine-independent)
// and the SHA-256 of its content, plus, for a file, where it was read.
type Input struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Hash string `json:"sha256"`
	// Path is the file read, absolute; empty for what is not a file.
	Path string `json:"-"`
	// Secret: the content is secret (an in-memory secret values file): its
	// hash, and the fingerprint over it, would let a reader confirm a
	// guessed value offline, so neither is ever printed.
	Secret bool `json:"secret,omitempty"`
}

// Tree is a parsed deployment directory, ready to fingerprint any of its
// releases in any environment.
type Tree struct {
	dir      string
	renderer string
	// base is what every release reads: module file, root package.
	base []Input
	// shared are the packages the root package's declarations outside
	// any release import; own the packages each release's declarations do.
	shared []*build.Instance
	own    map[string][]*build.Instance
	unsure error
	p      *load.Parsed

	// mu guards the memoized package inputs and the evaluated
	// environments: a Tree may be asked from several goroutines.
	mu   sync.Mutex
	pkgs map[string]pkgInputs
	envs *environments
	// cache keeps evaluated environments (UseCache).
	cache *cache.Cache
}

type pkgInputs struct {
	inputs []Input
	err    error
}

// environments are the evaluated environments: their names, each one's
// valuesFiles (nil slice: none) and their fleet declarations, or why they
// could not be read. fleetBad: a declaration is of the wrong type (the
// load that reads the fleet says where).
type environments struct {
	names    []string
	files    map[string][]string
	bad      map[string]error
	fleet    []fleet.Declaration
	fleetBad bool
	err      error
}

// Scan parses what dir's root package declares (see load.ParseImports)
// and hashes what every release reads. An unreadable directory is an
// error; syntax the scan cannot follow is not: Of then returns an
// ErrUnsure error.
func Scan(ctx context.Context, p *load.Parsed) (*Tree, error) {
	id, err := buildinfo.BuildID()
	if err != nil {
		return nil, fmt.Errorf("fingerprinting %s: identifying the renderer: %w", p.Dir, err)
	}
	bi := buildinfo.Read()
	t := &Tree{dir: p.Dir, renderer: id + " " + bi.CUEVersion + " " + bi.Catalog,
		own: map[string][]*build.Instance{}, pkgs: map[string]pkgInputs{}, p: p}
	mod, err := p.Source(p.ModuleFile())
	if err != nil {
		return nil, fmt.Errorf("fingerprinting %s: %w", p.Dir, err)
	}
	t.base = append(t.base, fileInput("module", "cue.mod/module.cue", p.ModuleFile(), withoutDeps(mod)))
	root, err := t.files(p.Root)
	if err != nil {
		t.unsure = err
	}
	t.base = append(t.base, root...)
	t.scanRoot(p.Root)
	return t, nil
}

// Releases are the release keys the root package declares by name, sorted.
func (t *Tree) Releases() []string {
	keys := make([]string, 0, len(t.own))
	for k := range t.own {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Environments are the environments the deployment declares, as the
// evaluator reads them (regular fields of `environments`; hidden fields
// and definitions are never environments); ok is false when they could
// not be evaluated.
func (t *Tree) Environments(ctx context.Context) (names []string, ok bool) {
	e := t.evaluated(ctx)
	if e.err != nil {
		return nil, false
	}
	return slices.Clone(e.names), true
}

// Fleet is the fleet the environments declare, read from the evaluation
// the fingerprints make (and cache), so reading it loads nothing more. An
// ErrUnsure error when the environments could not be evaluated or a
// declaration is of the wrong type: fleet.Read on a loaded deployment then
// says where.
func (t *Tree) Fleet(ctx context.Context) (*fleet.Fleet, error) {
	e := t.evaluated(ctx)
	switch {
	case e.err != nil:
		return nil, e.err
	case e.fleetBad:
		return nil, fmt.Errorf("reading the fleet of %s: %w", t.dir, ErrUnsure)
	}
	return fleet.New(e.fleet)
}

// Sure is nil when the scan could follow every declaration, else why not.
func (t *Tree) Sure() error { return t.unsure }

// Inputs are what a render adds to the directory.
type Inputs struct {
	// Environment is the environment rendered in, "" for none.
	Environment string
	// ValuesFiles are -f files, Values in-memory values files.
	ValuesFiles []string
	Values      []values.Input
	// Namespace overrides every release's namespace (smoke tests).
	Namespace string
}

// Of returns the fingerprint of release key rendered with in.
func (t *Tree) Of(ctx context.Context, key string, in Inputs) (string, error) {
	inputs, err := t.Explain(ctx, key, in)
	if err != nil {
		return "", err
	}
	return Sum(inputs), nil
}

// Sum is the fingerprint of a list of inputs (Explain's).
func Sum(inputs []Input) string {
	h := sha256.New()
	// One buffer and one write per input: a review sums every release in
	// every environment on both sides, and formatting each input with fmt
	// was most of that time.
	var buf []byte
	for _, in := range inputs {
		buf = appendInput(buf[:0], in)
		_, _ = h.Write(buf)
	}
	return Prefix + hex.EncodeToString(h.Sum(nil))
}

// Explain lists every input the fingerprint of release key rendered with
// in covers, in the order they are hashed: what `opm explain` prints.
func (t *Tree) Explain(ctx context.Context, key string, in Inputs) ([]Input, error) {
	if t.unsure != nil {
		return nil, t.unsure
	}
	own, ok := t.own[key]
	if !ok {
		return nil, fmt.Errorf("release %q is not declared by name in %s: %w", key, t.dir, ErrUnsure)
	}
	out := []Input{
		textInput("renderer", t.renderer, t.renderer),
		textInput("release", key, key),
		textInput("environment", in.Environment, in.Environment),
		textInput("namespace", in.Namespace, in.Namespace),
	}
	out = append(out, t.base...)
	for _, inst := range load.Closure(append(slices.Clone(t.shared), own...)...) {
		files, err := t.pkg(inst)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	if in.Environment != "" {
		files, err := t.ValuesFiles(ctx, in.Environment)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			out = append(out, t.readInput("valuesFiles", f, t.abs(f)))
		}
	}
	for _, f := range in.ValuesFiles {
		abs, _ := filepath.Abs(f)
		out = append(out, t.readInput("-f", f, abs))
	}
	for _, v := range in.Values {
		in := dataInput("values", v.Name+" secret="+strconv.FormatBool(v.Secret), v.Data)
		in.Secret = v.Secret
		out = append(out, in)
	}
	return out, nil
}

func (t *Tree) abs(f string) string {
	if filepath.IsAbs(f) {
		return filepath.Clean(f)
	}
	return filepath.Join(t.dir, f)
}

// pkg returns a package's file inputs, memoized.
func (t *Tree) pkg(inst *build.Instance) ([]Input, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.pkgs[inst.ImportPath]; ok {
		return r.inputs, r.err
	}
	in, err := t.files(inst)
	t.pkgs[inst.ImportPath] = pkgInputs{in, err}
	return in, err
}

// files are the inputs of one package: every file the loader resolved
// for it and every file their @embed attributes pull in. Files are named
// by the package's import path and their path relative to the package's
// directory, so a base read elsewhere, or a registry cache in another
// place, names them the same.
func (t *Tree) files(inst *build.Instance) ([]Input, error) {
	var out []Input
	for _, bf := range inst.BuildFiles {
		b, err := t.p.Source(bf.Filename)
		if err != nil {
			return nil, fmt.Errorf("fingerprinting %s: %w", bf.Filename, err)
		}
		out = append(out, fileInput("package", inst.ImportPath+"|"+relName(inst.Dir, bf.Filename), bf.Filename, b))
		embedded, err := t.p.EmbeddedFiles(bf.Filename, b)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrUnsure)
		}
		for _, f := range embedded {
			out = append(out, t.readInput("embed", inst.ImportPath+"|"+relName(inst.Dir, f), f))
		}
	}
	slices.SortFunc(out, func(a, b Input) int { return strings.Compare(a.Kind+a.Name, b.Kind+b.Name) })
	return out, nil
}

// relName is f relative to dir, with forward slashes.
func relName(dir, f string) string {
	if rel, err := filepath.Rel(dir, f); err == nil {
		return filepath.ToSlash(rel)
	}
	return filepath.ToSlash(f)
}

// evaluated evaluates the environments once, with every release pruned
// from the root package.
func (t *Tree) evaluated(ctx context.Context) *environments {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.envs != nil {
		return t.envs
	}
	t.mu.Unlock()
	// Pruned of every release, the root builds only what the
	// environments reach; where the syntax does not allow pruning, the
	// whole root package is evaluated (slower, as sound).
	// Pruning can also leave the root invalid (a let only the releases
	// used is then unreferenced): the whole root is evaluated then too.
	pruned := pruneRoot(t.p.Files(), t.dir, nil, t.p.Overlay, true)
	e, ok := t.environmentsWith(ctx, pruned)
	if !ok && pruned != nil {
		e, _ = t.environmentsWith(ctx, nil)
	}
	t.mu.Lock()
	if t.envs == nil {
		t.envs = e
	}
	return t.envs
}

// environmentsWith evaluates the environments with the root package read
// through pruned (nil: the whole root), from the cache when it has them;
// ok is false when the evaluation failed.
func (t *Tree) environmentsWith(ctx context.Context, pruned map[string][]byte) (*environments, bool) {
	reach := t.shared
	if pruned == nil || t.unsure != nil {
		reach = t.p.Root.Imports
	}
	// Both ways evaluate the same environments from the same inputs: one
	// key serves either.
	key := t.envKey(reach)
	if e, ok := t.cachedEnvironments(key); ok {
		return e, true
	}
	e := t.evaluateEnvironments(ctx, pruned)
	t.storeEnvironments(key, e)
	return e, e.err == nil
}

// evaluateEnvironments evaluates the environments, the root package read
// through overlay (pruned of every release, or nil).
func (t *Tree) evaluateEnvironments(ctx context.Context, overlay map[string][]byte) *environments {
	e := &environments{files: map[string][]string{}, bad: map[string]error{}}
	merged := map[string][]byte{}
	for k, v := range t.p.Overlay {
		merged[k] = v
	}
	for k, v := range overlay {
		merged[k] = v
	}
	envs, err := load.Environments(ctx, t.dir, merged)
	if err != nil {
		e.err = fmt.Errorf("%v: %w", err, ErrUnsure)
		return e
	}
	if e.names, err = load.FieldNames(envs); err != nil {
		e.err = fmt.Errorf("reading the environments of %s: %v: %w", t.dir, err, ErrUnsure)
		return e
	}
	for _, name := range e.names {
		files, err := valuesFilesOf(envs.LookupPath(cue.MakePath(cue.Str(name), cue.Str("valuesFiles"))))
		if err != nil {
			e.bad[name] = fmt.Errorf("environment %q: %v: %w", name, err, ErrUnsure)
			continue
		}
		e.files[name] = files
	}
	if e.fleet, err = fleet.Declare(t.dir, envs); err != nil {
		e.fleet, e.fleetBad = nil, true
	}
	return e
}

// ValuesFiles are the values files environment env declares, as the
// evaluator reads environments[env].valuesFiles (paths as written).
func (t *Tree) ValuesFiles(ctx context.Context, env string) ([]string, error) {
	e := t.evaluated(ctx)
	if e.err != nil {
		return nil, e.err
	}
	if err := e.bad[env]; err != nil {
		return nil, err
	}
	if !slices.Contains(e.names, env) {
		return nil, fmt.Errorf("environment %q is not declared in %s: %w", env, t.dir, ErrUnsure)
	}
	return e.files[env], nil
}

// valuesFilesOf reads a valuesFiles value the way engine/render does: a
// list of paths, or a map from release key to such lists (every file of
// every release counts: a fingerprint may cover more than one release
// reads, never less).
func valuesFilesOf(v cue.Value) ([]string, error) {
	if !v.Exists() {
		return nil, nil
	}
	var out []string
	read := func(list cue.Value) error {
		it, err := list.List()
		if err != nil {
			return fmt.Errorf("valuesFiles is not a list of paths: %w", err)
		}
		for it.Next() {
			s, err := it.Value().String()
			if err != nil {
				return fmt.Errorf("a valuesFiles entry is not a concrete string: %w", err)
			}
			out = append(out, s)
		}
		return nil
	}
	if v.IncompleteKind() == cue.ListKind {
		return out, read(v)
	}
	it, err := v.Fields()
	if err != nil {
		return nil, fmt.Errorf("valuesFiles is neither a list nor a map of lists: %w", err)
	}
	for it.Next() {
		if err := read(it.Value()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanRoot reads, per file of the root package, which declarations are
// releases and which packages each part imports.
func (t *Tree) scanRoot(root *build.Instance) {
	t.scanFiles(root.Files, root)
}

// scanFiles scans the root package's files; inst resolves imports to
// packages (nil: only names and syntax are checked, see PrunedRoot).
func (t *Tree) scanFiles(files []*ast.File, inst *build.Instance) {
	// A reference resolves to the value of the field it names: first
	// learn which values are `releases` and which are one release.
	marks := &releaseNodes{all: map[ast.Node]bool{}, one: map[ast.Node]string{}}
	for _, f := range files {
		for _, d := range f.Decls {
			top, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			if name, _, _ := ast.LabelName(top.Label); name != "releases" {
				continue
			}
			marks.all[top.Value] = true
			if st, ok := top.Value.(*ast.StructLit); ok {
				for _, e := range st.Elts {
					if rf, ok := e.(*ast.Field); ok {
						if name, ident, err := ast.LabelName(rf.Label); err == nil && !(ident && (strings.HasPrefix(name, "_") || strings.HasPrefix(name, "#"))) {
							marks.one[rf.Value] = name
						}
					}
				}
			}
		}
	}
	for _, f := range files {
		s := &fileScan{t: t, inst: inst, file: f, marks: marks}
		s.scan()
	}
}

// imports maps the names the file's imports declare (their alias, else
// the imported package's name) to the packages.
func (s *fileScan) imports() map[string]*build.Instance {
	if s.byName != nil {
		return s.byName
	}
	out := map[string]*build.Instance{}
	s.byName = out
	if s.inst == nil {
		return out
	}
	for spec := range s.file.ImportSpecs() {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		inst := s.inst.LookupImport(path)
		if inst == nil {
			continue
		}
		name := inst.PkgName
		if spec.Name != nil {
			name = spec.Name.Name
		}
		out[name] = inst
	}
	return out
}

// releaseNodes are the values of every `releases` field and of each
// release in them, by key.
type releaseNodes struct {
	all map[ast.Node]bool
	one map[ast.Node]string
}

// fileScan scans one file of the root package.
type fileScan struct {
	t      *Tree
	inst   *build.Instance
	file   *ast.File
	marks  *releaseNodes
	byName map[string]*build.Instance // imports(), once per file
}

func (s *fileScan) unsure(n ast.Node, what string) {
	if s.t.unsure == nil {
		s.t.unsure = fmt.Errorf("%s: %s: %w", n.Pos(), what, ErrUnsure)
	}
}

func (s *fileScan) scan() {
	var shared []ast.Node
	for _, d := range s.file.Decls {
		switch d := d.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.CommentGroup, *ast.Attribute:
		case *ast.Field:
			name, _, err := ast.LabelName(d.Label)
			switch {
			case err != nil:
				s.unsure(d, "a top-level field with a dynamic label")
			case name == "releases":
				shared = append(shared, s.releases(d.Value)...)
			default:
				shared = append(shared, d)
			}
		case *ast.LetClause:
			shared = append(shared, d)
		default:
			// An embedding or comprehension may declare releases.
			s.unsure(d, "a top-level embedding or comprehension")
		}
	}
	for _, n := range shared {
		s.t.shared = append(s.t.shared, s.refs(n, "")...)
	}
}

// releases records the release declarations of `releases: {…}` and
// returns what is shared: pattern constraints and the like.
func (s *fileScan) releases(v ast.Expr) (shared []ast.Node) {
	st, ok := v.(*ast.StructLit)
	if !ok {
		// `releases: core.#X & {…}` and the like.
		s.unsure(v, "releases declared other than as a struct of releases")
		return nil
	}
	for _, d := range st.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			if _, comment := d.(*ast.CommentGroup); !comment {
				s.unsure(d, "releases declared by an embedding or comprehension")
			}
			continue
		}
		if _, pattern := f.Label.(*ast.ListLit); pattern {
			shared = append(shared, f)
			continue
		}
		name, ident, err := ast.LabelName(f.Label)
		if err != nil {
			s.unsure(f, "a release with a dynamic name")
			continue
		}
		if ident && (strings.HasPrefix(name, "_") || strings.HasPrefix(name, "#")) {
			// A hidden field or a definition is no release: what it
			// imports, every release may read.
			shared = append(shared, f)
			continue
		}
		imps := s.refs(f.Value, name)
		s.t.own[name] = append(s.t.own[name], imps...)
	}
	return shared
}

// refs returns the packages n refers to. A reference to `releases` or to
// a release other than key ("" outside any release) makes the scan
// unsure: that release's imports would count too.
func (s *fileScan) refs(n ast.Node, key string) []*build.Instance {
	var out []*build.Instance
	imports := s.imports()
	ast.Walk(n, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		// By name too, whatever astutil resolved it to: where a field
		// and an import share a name (`releases: web: #module: web`),
		// counting the import as well can only over-approximate.
		if inst, ok := imports[id.Name]; ok {
			out = append(out, inst)
		}
		if (id.Name == "self" || id.Name == "__self") && (id.Node == nil || id.IsPredeclared()) {
			// aliasv2's self is the innermost block: at a file's top
			// level (or in the releases struct) it reads every release.
			s.unsure(id, "a reference through self")
			return true
		}
		switch ref := id.Node.(type) {
		case *ast.ImportSpec:
			path, err := strconv.Unquote(ref.Path.Value)
			if err != nil {
				s.unsure(id, "an import path that is not a string")
				return true
			}
			if s.inst == nil || stdlib(path) {
				// The standard library is part of CUE, which the
				// renderer's build ID covers.
				return true
			}
			if inst := s.inst.LookupImport(path); inst != nil {
				out = append(out, inst)
			} else {
				s.unsure(id, "an import that was not loaded")
			}
		case nil:
			// Unresolved within the file: a top-level field of another
			// file of the package, or a predeclared identifier.
			if id.Name == "releases" {
				s.unsure(id, "a reference to releases")
			}
		case *ast.Field:
			// An alias names the field itself.
			if name, _, _ := ast.LabelName(ref.Label); name == "releases" || s.marks.one[ref.Value] != "" {
				s.unsure(id, "a reference to releases")
			}
		default:
			if s.marks.all[ref] {
				s.unsure(id, "a reference to releases")
			} else if other, ok := s.marks.one[ref]; ok && other != key {
				s.unsure(id, "a declaration that refers to release "+other)
			}
		}
		return true
	}, nil)
	return out
}

// appendInput appends how an input is hashed to buf: its kind, a space,
// its name, NUL, the length of its hash in decimal, NUL, the hash.
func appendInput(buf []byte, in Input) []byte {
	buf = append(buf, in.Kind...)
	buf = append(buf, ' ')
	buf = append(buf, in.Name...)
	buf = append(buf, 0)
	buf = strconv.AppendInt(buf, int64(len(in.Hash)), 10)
	buf = append(buf, 0)
	return append(buf, in.Hash...)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func textInput(kind, name, text string) Input {
	return Input{Kind: kind, Name: name, Hash: sum([]byte(text))}
}

func dataInput(kind, name string, b []byte) Input { return Input{Kind: kind, Name: name, Hash: sum(b)} }

// withoutDeps is a module file with its deps left out, canonically
// formatted; the file as it is when it does not parse (the load then
// fails on it).
func withoutDeps(b []byte) []byte {
	f, err := modfile.Parse(b, "cue.mod/module.cue")
	if err != nil {
		return b
	}
	f.Deps = nil
	out, err := modfile.Format(f)
	if err != nil {
		return b
	}
	return out
}

func fileInput(kind, name, path string, b []byte) Input {
	return Input{Kind: kind, Name: name, Hash: sum(b), Path: path}
}

// readInput hashes a file as the deployment holds it (a review's base
// read from git: the commit's, else the disk's); one that cannot be read
// hashes as such (the render fails on it, and a file that appears later
// changes the fingerprint).
func (t *Tree) readInput(kind, name, path string) Input {
	b, err := t.p.Source(path)
	if err != nil {
		why := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error() // without the path, which is this machine's
		}
		return Input{Kind: kind, Name: name + " (unreadable)", Hash: sum([]byte(why)), Path: path}
	}
	return fileInput(kind, name, path, b)
}

// stdlib reports whether an import path names a package of CUE's
// standard library: its first element has no dot (CUE's own rule).
func stdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
