// Package fingerprint computes a release's input fingerprint: one hash of
// everything its render in an environment reads, from what cue/load parses
// and nothing evaluated, so equal fingerprints mean byte-identical renders
// and a caller may skip the render (Bazel's action key, for CUE).
//
// A fingerprint covers, for release R in environment E:
//   - the renderer: opm's version and commit (or, for a development build,
//     the executable's size and modification time);
//   - the deployment's module file and every file of its root package;
//   - every file of every package R's declaration can reach: the packages
//     the root package's shared declarations import, those R's own
//     `releases: R: …` declarations import, and everything they import in
//     turn — local packages, registry modules and the embedded catalog by
//     content, so a dependency's version is covered by what it contains;
//   - E's name and the content of every values file E declares
//     (valuesFiles, read syntactically), the -f files and in-memory values
//     by content, R's key and a namespace override.
//
// Where the syntax cannot show this for certain — a release declared by a
// comprehension or under a dynamic label, a release that refers to
// another, valuesFiles that are not literal paths, a file embedding
// others (@embed) — the package says so (ErrUnsure) and the caller
// renders: a fingerprint is never a guess.
package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/values"
)

// Prefix starts every fingerprint, naming its algorithm and format; a
// change to what a fingerprint covers changes it, so no fingerprint of
// an older opm ever equals a newer one.
const Prefix = "inputs-sha256-v1:"

// ErrUnsure is wrapped by every error that means "the syntax does not
// show what this release reads": not a failure, a reason to render.
var ErrUnsure = errors.New("the inputs cannot be determined without evaluating")

// Tree is a parsed deployment directory, ready to fingerprint any of its
// releases in any environment.
type Tree struct {
	dir      string
	renderer string
	// base hashes what every release reads: module file, root package.
	base []byte
	// shared are the packages the root package's declarations outside
	// any release import; own the packages each release's declarations do.
	shared []*build.Instance
	own    map[string][]*build.Instance
	// envFiles are the values files environments declare, "" for
	// declarations every environment may take (a definition, a pattern).
	envFiles map[string][]string
	envs     []string
	envsOK   bool              // envs are every environment declared
	pkgs     map[string][]byte // package hash by import path, memoized
	unsure   error
	p        *load.Parsed
}

// Scan parses dir (see load.Parse) and reads which release declarations
// import what. An unreadable directory is an error; syntax the scan cannot
// follow is not: Of then returns an ErrUnsure error.
func Scan(p *load.Parsed) (*Tree, error) {
	t := &Tree{dir: p.Dir, renderer: renderer(), envsOK: true, own: map[string][]*build.Instance{}, envFiles: map[string][]string{}, pkgs: map[string][]byte{}, p: p}
	h := sha256.New()
	mod, err := p.Source(filepath.Join(p.Dir, "cue.mod", "module.cue"))
	if err != nil {
		return nil, fmt.Errorf("fingerprinting %s: %w", p.Dir, err)
	}
	writeField(h, "module.cue", mod)
	if err := t.hashFiles(h, p.Root); err != nil {
		return nil, err
	}
	t.base = h.Sum(nil)
	t.scanRoot(p.Root)
	for _, imp := range p.Root.Imports {
		if t.inside(imp.Dir) {
			t.scanValuesFiles(imp, false)
		}
	}
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

// Environments are the environment names the root package declares by
// name; ok is false when it may declare others the syntax does not show
// (a comprehension, an embedding, a dynamic name).
func (t *Tree) Environments() (names []string, ok bool) {
	return slices.Clone(t.envs), t.envsOK && t.unsure == nil
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
func (t *Tree) Of(key string, in Inputs) (string, error) {
	if t.unsure != nil {
		return "", t.unsure
	}
	own, ok := t.own[key]
	if !ok {
		return "", fmt.Errorf("release %q is not declared by name in %s: %w", key, t.dir, ErrUnsure)
	}
	h := sha256.New()
	writeField(h, "renderer", []byte(t.renderer))
	writeField(h, "base", t.base)
	writeField(h, "release", []byte(key))
	writeField(h, "environment", []byte(in.Environment))
	writeField(h, "namespace", []byte(in.Namespace))
	var pkgs []string
	for _, inst := range append(slices.Clone(t.shared), own...) {
		if !slices.Contains(pkgs, inst.ImportPath) {
			pkgs = append(pkgs, inst.ImportPath)
		}
	}
	slices.Sort(pkgs)
	for _, path := range pkgs {
		ph, err := t.pkgHash(t.instance(path))
		if err != nil {
			return "", err
		}
		writeField(h, "package "+path, ph)
	}
	var files []string
	files = append(files, t.envFiles[""]...)
	if in.Environment != "" {
		files = append(files, t.envFiles[in.Environment]...)
	}
	for _, f := range files {
		p := f
		if !filepath.IsAbs(p) {
			p = filepath.Join(t.dir, f)
		}
		writeFile(h, "valuesFiles "+f, p)
	}
	for _, f := range in.ValuesFiles {
		writeFile(h, "-f "+f, f)
	}
	for _, v := range in.Values {
		writeField(h, "values "+v.Name+" "+strconv.FormatBool(v.Secret), v.Data)
	}
	return Prefix + hex.EncodeToString(h.Sum(nil)), nil
}

// instance finds a package of the closure by import path.
func (t *Tree) instance(path string) *build.Instance {
	var find func(insts []*build.Instance) *build.Instance
	seen := map[string]bool{}
	find = func(insts []*build.Instance) *build.Instance {
		for _, inst := range insts {
			if inst.ImportPath == path {
				return inst
			}
			if seen[inst.ImportPath] {
				continue
			}
			seen[inst.ImportPath] = true
			if found := find(inst.Imports); found != nil {
				return found
			}
		}
		return nil
	}
	return find(t.p.Root.Imports)
}

// pkgHash hashes a package's files and, recursively, its imports'.
func (t *Tree) pkgHash(inst *build.Instance) ([]byte, error) {
	if inst == nil {
		return nil, fmt.Errorf("a package of %s was not loaded: %w", t.dir, ErrUnsure)
	}
	if h, ok := t.pkgs[inst.ImportPath]; ok {
		return h, nil
	}
	h := sha256.New()
	if err := t.hashFiles(h, inst); err != nil {
		return nil, err
	}
	imps := slices.Clone(inst.Imports)
	slices.SortFunc(imps, func(a, b *build.Instance) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	for _, imp := range imps {
		ih, err := t.pkgHash(imp)
		if err != nil {
			return nil, err
		}
		writeField(h, "import "+imp.ImportPath, ih)
	}
	sum := h.Sum(nil)
	t.pkgs[inst.ImportPath] = sum
	return sum, nil
}

// hashFiles writes every file of inst, named relative to the deployment
// directory when inside it (a base checked out elsewhere hashes the same).
func (t *Tree) hashFiles(h io.Writer, inst *build.Instance) error {
	files := make([]string, 0, len(inst.BuildFiles))
	for _, f := range inst.BuildFiles {
		files = append(files, f.Filename)
	}
	slices.Sort(files)
	for _, f := range files {
		b, err := t.p.Source(f)
		if err != nil {
			return fmt.Errorf("fingerprinting %s: %w", f, err)
		}
		if strings.Contains(string(b), "@embed(") || strings.Contains(string(b), "@extern(") {
			t.unsure = fmt.Errorf("%s embeds other files: %w", f, ErrUnsure)
		}
		writeField(h, t.name(f), b)
	}
	return nil
}

func (t *Tree) name(f string) string {
	if rel, err := filepath.Rel(t.dir, f); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return f
}

func (t *Tree) inside(dir string) bool {
	rel, err := filepath.Rel(t.dir, dir)
	return err == nil && !strings.HasPrefix(rel, "..")
}

// scanRoot reads, per file of the root package, which declarations are
// releases and which packages each part imports.
func (t *Tree) scanRoot(root *build.Instance) {
	t.scanFiles(root.Files, root)
	t.scanValuesFiles(root, true)
	slices.Sort(t.envs)
	t.envs = slices.Compact(t.envs)
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
						if name, _, err := ast.LabelName(rf.Label); err == nil {
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
			case name == "environments":
				s.environments(d.Value)
				shared = append(shared, d)
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
		for _, imp := range s.refs(n, "") {
			s.t.shared = append(s.t.shared, imp)
		}
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
		name, _, err := ast.LabelName(f.Label)
		if err != nil {
			s.unsure(f, "a release with a dynamic name")
			continue
		}
		imps := s.refs(f.Value, name)
		s.t.own[name] = append(s.t.own[name], imps...)
	}
	return shared
}

// environments records the environments declared by name.
func (s *fileScan) environments(v ast.Expr) {
	st, ok := v.(*ast.StructLit)
	if !ok {
		s.t.envsOK = false
		return
	}
	for _, d := range st.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			if _, comment := d.(*ast.CommentGroup); !comment {
				s.t.envsOK = false
			}
			continue
		}
		if _, pattern := f.Label.(*ast.ListLit); pattern {
			continue
		}
		name, _, err := ast.LabelName(f.Label)
		if err != nil {
			s.t.envsOK = false
			continue
		}
		s.t.envs = append(s.t.envs, name)
	}
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
		switch ref := id.Node.(type) {
		case *ast.ImportSpec:
			path, err := strconv.Unquote(ref.Path.Value)
			if err != nil {
				s.unsure(id, "an import path that is not a string")
				return true
			}
			if s.inst == nil {
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

// scanValuesFiles collects the literal paths of every valuesFiles field
// of inst: by environment when declared under `environments: NAME:` of
// the root package, else for every environment. An imported package may
// have been parsed only up to its imports (load.ParseImports): a file
// that mentions valuesFiles is parsed whole here.
func (t *Tree) scanValuesFiles(inst *build.Instance, root bool) {
	files := inst.Files
	if !root {
		files = nil
		for _, bf := range inst.BuildFiles {
			b, err := t.p.Source(bf.Filename)
			if err != nil {
				t.unsure = fmt.Errorf("reading %s: %w", bf.Filename, ErrUnsure)
				return
			}
			if !bytes.Contains(b, []byte("valuesFiles")) {
				continue
			}
			f, err := parser.ParseFile(bf.Filename, b)
			if err != nil {
				t.unsure = fmt.Errorf("parsing %s: %w", bf.Filename, ErrUnsure)
				return
			}
			files = append(files, f)
		}
	}
	for _, f := range files {
		var path []string
		ast.Walk(f, func(n ast.Node) bool {
			fld, ok := n.(*ast.Field)
			if !ok {
				return true
			}
			name, _, err := ast.LabelName(fld.Label)
			if _, pattern := fld.Label.(*ast.ListLit); pattern || err != nil {
				name = "\x00"
			}
			if name == "valuesFiles" {
				env := ""
				if root && len(path) >= 2 && path[0] == "environments" && path[1] != "\x00" {
					env = path[1]
				}
				paths, ok := literalPaths(fld.Value)
				if !ok && t.unsure == nil {
					t.unsure = fmt.Errorf("%s: valuesFiles that are not literal paths: %w", fld.Pos(), ErrUnsure)
				}
				t.envFiles[env] = append(t.envFiles[env], paths...)
				return false
			}
			path = append(path, name)
			return true
		}, func(n ast.Node) {
			// Only fields whose walk went on were pushed.
			if _, ok := n.(*ast.Field); ok {
				path = path[:len(path)-1]
			}
		})
	}
}

// literalPaths reads a list of string literals, or a struct of such lists.
func literalPaths(e ast.Expr) ([]string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return nil, false
		}
		s, err := strconv.Unquote(e.Value)
		return []string{s}, err == nil
	case *ast.ListLit:
		var out []string
		for _, x := range e.Elts {
			p, ok := literalPaths(x)
			if !ok {
				return nil, false
			}
			out = append(out, p...)
		}
		return out, true
	case *ast.StructLit:
		var out []string
		for _, d := range e.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				if _, comment := d.(*ast.CommentGroup); comment {
					continue
				}
				return nil, false
			}
			p, ok := literalPaths(f.Value)
			if !ok {
				return nil, false
			}
			out = append(out, p...)
		}
		return out, true
	}
	return nil, false
}

// renderer names the opm that renders: its release and commit, or, for a
// build with local changes or none recorded, the executable itself.
func renderer() string {
	bi := buildinfo.Read()
	id := bi.Version + " " + bi.Commit + " " + bi.CUEVersion + " " + bi.Catalog
	if bi.Commit == "" || bi.Modified {
		if exe, err := os.Executable(); err == nil {
			if st, err := os.Stat(exe); err == nil {
				id += fmt.Sprintf(" %s %d %d", exe, st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	return id
}

func writeField(h io.Writer, name string, b []byte) {
	fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
	_, _ = h.Write(b)
}

// writeFile hashes a file's content; a file that cannot be read hashes as
// such (the render fails on it, and a later file changes the fingerprint).
func writeFile(h io.Writer, name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		writeField(h, name+" unreadable", []byte(err.Error()))
		return
	}
	writeField(h, name, b)
}
