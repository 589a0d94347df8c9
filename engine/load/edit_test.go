package load_test

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/load"
)

// An edit changes what the evaluation sees of one imported package, and
// nothing else: the root package as parsed, a package built again, a memo.
func TestEditChangesOnlyTheEvaluation(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"d.cue":              "package d\n\nimport \"example.com/d/m\"\n\nreleases: {}\nseen: m.#parts\n",
		"m/m.cue":            "package m\n\n#parts: {a: 1, b: 2}\n",
	})
	drop := func(root *build.Instance) (string, func([]*ast.File) ([]*ast.File, error)) {
		return root.Imports[0].ImportPath, func(files []*ast.File) ([]*ast.File, error) {
			for _, f := range files {
				for _, decl := range f.Decls {
					if field, ok := decl.(*ast.Field); ok {
						field.Value.(*ast.StructLit).Elts = field.Value.(*ast.StructLit).Elts[:1]
					}
				}
			}
			return files, nil
		}
	}
	fields := func(v cue.Value) []string {
		names, err := load.FieldNames(v)
		assert.NilError(t, err)
		return names
	}

	d, err := load.LoadWith(t.Context(), dir, load.Options{Edit: drop})
	assert.NilError(t, err)
	assert.DeepEqual(t, fields(d.Root.LookupPath(cue.ParsePath("seen"))), []string{"a"})
	// As written everywhere else.
	module := d.RootPackage().Imports[0]
	assert.Equal(t, len(module.Files[0].Decls[1].(*ast.Field).Value.(*ast.StructLit).Elts), 2)
	built, err := d.BuildPackage(module, nil)
	assert.NilError(t, err)
	assert.DeepEqual(t, fields(built.Package.LookupPath(cue.ParsePath("#parts"))), []string{"a", "b"})
	whole, err := load.LoadWith(t.Context(), dir, load.Options{})
	assert.NilError(t, err)
	assert.DeepEqual(t, fields(whole.Root.LookupPath(cue.ParsePath("seen"))), []string{"a", "b"})

	// A memo never serves, nor keeps, an edited load.
	m := load.NewMemo()
	a, err := m.LoadWith(t.Context(), dir, load.Options{Edit: drop})
	assert.NilError(t, err)
	b, err := m.LoadWith(t.Context(), dir, load.Options{})
	assert.NilError(t, err)
	assert.Assert(t, a != b)
	assert.DeepEqual(t, fields(b.Root.LookupPath(cue.ParsePath("seen"))), []string{"a", "b"})

	// An edit of nothing is the load as written; of a package the root
	// does not import, an error.
	none, err := load.LoadWith(t.Context(), dir, load.Options{Edit: func(*build.Instance) (string, func([]*ast.File) ([]*ast.File, error)) { return "", nil }})
	assert.NilError(t, err)
	assert.DeepEqual(t, fields(none.Root.LookupPath(cue.ParsePath("seen"))), []string{"a", "b"})
	_, err = load.LoadWith(t.Context(), dir, load.Options{Edit: func(*build.Instance) (string, func([]*ast.File) ([]*ast.File, error)) {
		return "example.com/other", func(f []*ast.File) ([]*ast.File, error) { return f, nil }
	}})
	assert.ErrorContains(t, err, "imports no package example.com/other")
}
