package pipeline_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// The Dagger module (dagger/) cannot run here: no Dagger engine. These
// tests keep it in step with pipeline; `make daggercheck` (hack/daggercheck)
// loads it with the engine's own code generator, builds and vets it.

func TestDaggerJSONNamesTheModule(t *testing.T) {
	b, err := os.ReadFile("../dagger.json")
	assert.NilError(t, err)
	var cfg struct {
		Name          string `json:"name"`
		EngineVersion string `json:"engineVersion"`
		SDK           struct {
			Source string `json:"source"`
		} `json:"sdk"`
		Source string `json:"source"`
	}
	assert.NilError(t, json.Unmarshal(b, &cfg))
	assert.Equal(t, cfg.Name, "opm")
	assert.Equal(t, cfg.SDK.Source, "go")
	assert.Equal(t, cfg.Source, "dagger")
	assert.Check(t, strings.HasPrefix(cfg.EngineVersion, "v0."))
	_, err = os.Stat(filepath.Join("..", cfg.Source, "main.go"))
	assert.NilError(t, err, "dagger.json's source directory holds the module")
	gomod, err := os.ReadFile("../dagger/go.mod")
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(gomod), "module dagger/opm"))
	assert.Check(t, is.Contains(string(gomod), "replace github.com/opmodel/pipeline => ../"))
}

// operations lists pipeline's operations: exported functions whose second
// parameter is an *Options type (Render(ctx, RenderOptions), …).
func operations(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	assert.NilError(t, err)
	var ops []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		assert.NilError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || len(fn.Type.Params.List) != 2 {
				continue
			}
			if id, ok := fn.Type.Params.List[1].Type.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Options") {
				ops = append(ops, fn.Name.Name)
			}
		}
	}
	return ops
}

func TestEveryPipelineOperationHasADaggerFunction(t *testing.T) {
	ops := operations(t)
	assert.Check(t, len(ops) >= 7, "found operations %v", ops)
	f, err := parser.ParseFile(token.NewFileSet(), "../dagger/main.go", nil, parser.ParseComments)
	assert.NilError(t, err)
	funcs := map[string]*ast.FuncDecl{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.IsExported() {
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok && star.X.(*ast.Ident).Name == "Opm" {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	for _, op := range ops {
		fn, ok := funcs[op]
		if !assert.Check(t, ok, "pipeline.%s has no Dagger function Opm.%s", op, op) {
			continue
		}
		calls := false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "pipeline" && sel.Sel.Name == op {
					calls = true
				}
			}
			return true
		})
		assert.Check(t, calls, "Opm.%s does not call pipeline.%s", op, op)
		// Operations on the source alone may be cached by Dagger, keyed by
		// their inputs; the others reach a cluster.
		writes := !slices.Contains([]string{"Render", "Review", "ReviewShard", "PlanReview"}, op)
		if writes {
			assert.Check(t, fn.Doc != nil && strings.Contains(fn.Doc.Text(), `+cache="never"`), "Opm.%s reaches a cluster and must not be cached", op)
		}
	}
}
