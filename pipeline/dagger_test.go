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

// helpers are pipeline's exported functions that are no operation of
// their own: what a front door parses its flags with, or what it gives an
// operation. Every other exported function is an operation, and the
// Dagger module must offer it as the CLI and the Action do.
var helpers = map[string]string{
	"Actor":                "who applies, from a front door's environment (ApplyOptions.Actor's default)",
	"BaseRef":              "the refs a --base names, given to Review, ReviewShard and PlanReview",
	"ContainerKubeconfig":  "the kubeconfig a container reaches the host's cluster with (the Dagger module itself)",
	"DeclaredEnvironments": "shell completion of --env",
	"DeclaredNames":        "shell completion of --env, --group, --release",
	"DefaultTakeOver":      "the default of --take-over",
	"Fleet":                "the environments a selection names, which the CLI and the Action list and route with; Plan offers it",
	"NewSealer":            "the seal key a front door's results are sealed with",
	"ParseShard":           "parses --shard",
	"ReadSplit":            "reads --plan's file for ReviewShard",
	"SmokeSteps":           "the step names --steps accepts",
	"WithSession":          "the session a front door opens per command (the Dagger module, per call in redacting)",
}

// routed are operations a Dagger function reaches through another, as
// the CLI does: apply of one environment through Deploy, which routes it.
var routed = map[string]string{"Apply": "Deploy", "MergeReviews": "MergeReviewFiles"}

// operations lists pipeline's operations: its exported functions that
// are not helpers.
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
			if !ok || fn.Recv != nil || !fn.Name.IsExported() {
				continue
			}
			if _, ok := helpers[fn.Name.Name]; !ok {
				ops = append(ops, fn.Name.Name)
			}
		}
	}
	return ops
}

func TestEveryPipelineOperationHasADaggerFunction(t *testing.T) {
	ops := operations(t)
	assert.Check(t, len(ops) >= 20, "found operations %v", ops)
	f, err := parser.ParseFile(token.NewFileSet(), "../dagger/main.go", nil, parser.ParseComments)
	assert.NilError(t, err)
	// callers[op]: the Dagger functions (methods of Opm) that call it.
	callers := map[string][]*ast.FuncDecl{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || !fn.Name.IsExported() {
			continue
		}
		if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); !ok || star.X.(*ast.Ident).Name != "Opm" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "pipeline" {
					callers[sel.Sel.Name] = append(callers[sel.Sel.Name], fn)
				}
			}
			return true
		})
	}
	for _, op := range ops {
		fns := callers[op]
		if via, ok := routed[op]; ok && len(fns) == 0 {
			fns = callers[via]
		}
		if !assert.Check(t, len(fns) > 0, "pipeline.%s is offered by no Dagger function (or name it among the helpers, with why)", op) {
			continue
		}
		// Operations on the source alone may be cached by Dagger, keyed by
		// their inputs; the others reach a cluster.
		if slices.Contains([]string{"Render", "Review", "ReviewShard", "PlanReview", "MergeReviews", "MergeReviewFiles", "Explain", "PlanFleet"}, op) {
			continue
		}
		for _, fn := range fns {
			assert.Check(t, fn.Doc != nil && strings.Contains(fn.Doc.Text(), `+cache="never"`), "Opm.%s reaches a cluster (pipeline.%s) and must not be cached", fn.Name.Name, op)
		}
	}
}
