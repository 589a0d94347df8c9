package render

import (
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
)

// What a component's syntax reads of #config: the fields it selects, or
// everything when it reads #config whole or any name outside itself that
// is not an imported package or CUE's own.
func TestConfigReadsFollowTheSyntax(t *testing.T) {
	parse := func(name, src string) *ast.File {
		f, err := parser.ParseFile(name, src)
		assert.NilError(t, err)
		return f
	}
	files := []*ast.File{
		parse("m.cue", `package m

import core "github.com/opmodel/pipeline/catalog@v0"

#config: {image: *"x" | string, rev: *"1" | string, port: *80 | int}
_rev: #config.rev

#components: {
	image: {core.#Workload, spec: workload: container: image: #config.image, n: len("x") & int}
	two: {spec: {x: "t-\(#config.rev)", p: #config.port, let y = 1, z: y, self: x}}
	helper: spec: x: _rev
	whole: spec: {for k, v in #config {(k): v}}
	elsewhere: spec: x: fromOtherFile
	literal: spec: x: "1"
}
`),
		parse("n.cue", `package m

#components: elsewhere: spec: y: #config.image
fromOtherFile: "1"
`),
	}
	got := configReads(files)
	want := map[string]configRead{
		"image":     {keys: []string{"image"}},
		"two":       {keys: []string{"rev", "port"}},
		"helper":    {all: true},
		"whole":     {all: true},
		"elsewhere": {all: true, keys: []string{"image"}},
		"literal":   {},
	}
	assert.DeepEqual(t, got, want, cmp.AllowUnexported(configRead{}))
	assert.Check(t, got["image"].reads([]string{"image"}))
	assert.Check(t, !got["image"].reads([]string{"rev"}))
	assert.Check(t, got["helper"].reads(nil))
	assert.Check(t, !got["literal"].reads([]string{"image", "rev", "port"}))
}
