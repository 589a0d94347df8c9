package load

import (
	"errors"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func instanceOf(t *testing.T, src string) *build.Instance {
	t.Helper()
	f, err := parser.ParseFile("deploy.cue", src)
	assert.NilError(t, err)
	return &build.Instance{Files: []*ast.File{f}}
}

func TestShadowedImportNamesTheField(t *testing.T) {
	for name, c := range map[string]struct {
		src, cueSays string
		want         []string
	}{
		"a provider key": {
			src: "package deploy\nimport kubernetes \"example.com/providers/kubernetes\"\n" +
				"providers: kubernetes: kubernetes.#Provider\n",
			cueSays: `imported and not used: "example.com/providers/kubernetes"`,
			want:    []string{"`kubernetes` at deploy.cue:3:24 refers to the field providers.kubernetes (deploy.cue:3:12)", `import kubernetesmod "example.com/providers/kubernetes"`},
		},
		"an environment": {
			src: "package deploy\nimport staging \"example.com/envs/staging\"\n" +
				"environments: {\n\tstaging: {\n\t\tvalues: staging.values\n\t}\n}\n",
			cueSays: `imported and not used: "example.com/envs/staging" as staging`,
			want:    []string{"`staging` at deploy.cue:5:11 refers to the field environments.staging (deploy.cue:4:2)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			hints := shadowedImports([]*build.Instance{instanceOf(t, c.src)}, errors.New(c.cueSays))
			assert.Equal(t, len(hints), 1)
			for _, w := range c.want {
				assert.Check(t, is.Contains(hints[0], w))
			}
		})
	}
}

func TestUnusedImportThatIsReallyUnusedGetsNoHint(t *testing.T) {
	inst := instanceOf(t, "package deploy\nimport orders \"example.com/orders\"\nreleases: shop: values: x: 1\n")
	assert.Equal(t, len(shadowedImports([]*build.Instance{inst}, errors.New(`imported and not used: "example.com/orders" as orders`))), 0)
}

func TestDefaultImportName(t *testing.T) {
	assert.Equal(t, defaultImportName("example.com/providers/kubernetes@v0"), "kubernetes")
	assert.Equal(t, defaultImportName("example.com/minecraft@v0:main"), "main")
	assert.Equal(t, defaultImportName("strings"), "strings")
}
