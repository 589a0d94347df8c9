package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagger/dagger/cmd/codegen/introspection"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// A module API as moduleAPI builds it, from a small generated file and
// source, plus the real core schema.
func testAPI(t *testing.T) *api {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) {
		assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("main.go", `// The m module.
package main

type Mod struct {
	Path string
	// +private
	Secret string
}

func New(
	// +optional
	path string,
	// +optional
	kubeconfig *dagger.Secret,
) *Mod { return nil }

type Result struct {
	Summary string
	Items   []*Item
}

type Item struct{ Name string }

func (m *Mod) Apply(ctx context.Context,
	// +optional
	env string,
	// +optional
	release []string,
	// +optional
	dryRun bool,
) (*Result, error) { return nil, nil }

func (m *Mod) Review(ctx context.Context,
	// The base.
	base *dagger.Directory,
) (*Result, error) { return nil, nil }

func (r *Result) Manifests() *dagger.File { return nil }
`)
	write("dagger.gen.go", `package main

func invoke(ctx context.Context, parentJSON []byte, parentName string, fnName string, inputArgs map[string][]byte) (_ any, err error) {
	switch parentName {
	case "Mod":
		switch fnName {
		case "Apply":
			var env string
			_ = inputArgs["env"]
			var release []string
			_ = inputArgs["release"]
			var dryRun bool
			_ = inputArgs["dryRun"]
			return nil, nil
		case "Review":
			var base *dagger.Directory
			_ = inputArgs["base"]
			return nil, nil
		case "":
			var path string
			_ = inputArgs["path"]
			var kubeconfig *dagger.Secret
			_ = inputArgs["kubeconfig"]
			return nil, nil
		}
	case "Result":
		switch fnName {
		case "Manifests":
			return nil, nil
		}
	}
	return nil, nil
}
`)
	yes := "false"
	schema := &introspection.Response{Schema: &introspection.Schema{Types: introspection.Types{{
		Kind: introspection.TypeKindObject, Name: "File",
		Fields: []*introspection.Field{{
			Name:    "export",
			TypeRef: &introspection.TypeRef{Kind: introspection.TypeKindNonNull, OfType: &introspection.TypeRef{Kind: introspection.TypeKindScalar, Name: "String"}},
			Args: introspection.InputValues{
				{Name: "path", TypeRef: &introspection.TypeRef{Kind: introspection.TypeKindNonNull, OfType: &introspection.TypeRef{Kind: introspection.TypeKindScalar, Name: "String"}}},
				{Name: "allowParentDirOverwrite", DefaultValue: &yes, TypeRef: &introspection.TypeRef{Kind: introspection.TypeKindScalar, Name: "Boolean"}},
			},
		}},
	}}}}
	a, err := moduleAPI(filepath.Join(dir, "dagger.gen.go"), "mod", schema)
	assert.NilError(t, err)
	assert.Equal(t, a.description, "The m module.")
	return a
}

func TestCheckCalls(t *testing.T) {
	a := testAPI(t)
	for _, ok := range []string{
		"apply summary",
		"--path examples --kubeconfig file://$HOME/.kube/config apply --env staging --release a --release b --dry-run summary",
		"apply --dry-run=true --env=staging items name",
		"review --base . manifests export --path out.yaml --allow-parent-dir-overwrite",
		"path",
		"-o out.txt apply summary",
	} {
		assert.Check(t, a.check(strings.Fields(ok)), ok)
	}
	for call, want := range map[string]string{
		"apply --releases a summary":            "apply has no flag --releases (it has --dry-run, --env, --release)",
		"--secret x apply":                      "the constructor has no flag --secret",
		"plan --env staging":                    `Mod has no function or field "plan"`,
		"apply summary length":                  `"length" follows a value that has no fields`,
		"review summary":                        "review needs --base",
		"review --base . manifests export":      "export needs --path",
		"apply --env":                           "flag --env needs a value",
		"apply --dry-run --env staging bogus":   `Result has no function or field "bogus" (it has items, manifests, summary)`,
		"review --base . manifests export -p x": "export has no flag -p",
	} {
		err := a.check(strings.Fields(call))
		assert.Check(t, is.ErrorContains(err, want), call)
	}
}

func TestFindCalls(t *testing.T) {
	md := "Run `dagger call apply --env x` or `opm apply`.\n" +
		"```sh\n" +
		"dagger call --path examples \\\n  apply --env staging summary | tee out  # a comment\n" +
		"dagger -m github.com/other/module call hello\n" +
		"dagger -m github.com/opmodel/pipeline@v1.0.0 call --source . render\n" +
		"dagger functions\n" +
		"```\n"
	var got []string
	for _, c := range markdownCalls("README.md", md) {
		got = append(got, c.where+" "+strings.Join(c.words, " "))
	}
	assert.DeepEqual(t, got, []string{
		"README.md:1 apply --env x",
		"README.md:3 --path examples apply --env staging summary",
		"README.md:6 --source . render",
	})

	wf := `jobs:
  a:
    steps:
      - uses: dagger/dagger-for-github@v7
        with:
          verb: call
          args: --path examples render --env staging digest
      - uses: dagger/dagger-for-github@v7
        with:
          verb: core
          args: version
      - run: |
          echo start
          dagger call --kubeconfig "file://$RUNNER_TEMP/k config" apply --release a summary | tee x
`
	calls, err := workflowCalls("w.yml", []byte(wf))
	assert.NilError(t, err)
	got = nil
	for _, c := range calls {
		got = append(got, c.where+" "+strings.Join(c.words, "|"))
	}
	assert.DeepEqual(t, got, []string{
		"w.yml:7 --path|examples|render|--env|staging|digest",
		"w.yml:14 --kubeconfig|file://$RUNNER_TEMP/k config|apply|--release|a|summary",
	})
}

func TestUploadedFiles(t *testing.T) {
	repo := t.TempDir()
	files := map[string]string{
		"dagger.json":             "{}",
		"dagger/main.go":          "package main",
		"dagger/dagger.gen.go":    "package main",
		"dagger/.gitignore":       "/dagger.gen.go\n",
		"go.mod":                  "module x",
		"engine/a/a.go":           "package a",
		"engine/a/a_test.go":      "package a",
		"engine/a/testdata/x.cue": "x",
		"cmd/opm/main.go":         "package main",
		".gitignore":              "bin/\n",
		"bin/tool":                "x",
	}
	for name, content := range files {
		assert.NilError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755))
		assert.NilError(t, os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644))
	}
	cmd := exec.Command("git", "init", "-q", repo)
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, string(out))

	cfg := moduleConfig{Source: "dagger", Include: []string{"go.mod", "engine/**", "!**/*_test.go"}}
	got, err := uploadedFiles(repo, uploadPatterns(cfg))
	assert.NilError(t, err)
	assert.DeepEqual(t, got, []string{"dagger.json", "dagger/.gitignore", "dagger/main.go", "engine/a/a.go", "engine/a/testdata/x.cue", "go.mod"})
}

func TestModuleSchemaFromThePinnedEngine(t *testing.T) {
	dir, err := moduleDir(daggerModule)
	assert.NilError(t, err)
	resp, err := moduleSchema(dir, "v0.19.7")
	assert.NilError(t, err)
	s := resp.Schema
	assert.Equal(t, s.QueryType.Name, "Query")
	for _, hidden := range []string{"Host", "HostID", "Engine", "EngineCache"} {
		assert.Check(t, s.Types.Get(hidden) == nil, "%s is hidden from modules", hidden)
	}
	assert.Check(t, s.Query() != nil && len(s.Query().Fields) > 20)
	for _, f := range s.Query().Fields {
		assert.Check(t, f.Name != "host", "Query.host returns the hidden Host")
	}

	enum := s.Types.Get("ImageLayerCompression")
	assert.Assert(t, enum != nil)
	values := map[string]string{}
	for _, v := range enum.EnumValues {
		values[v.Name] = v.Directives.EnumValue()
	}
	assert.DeepEqual(t, values, map[string]string{"Gzip": "", "GZIP": "Gzip", "Zstd": "", "ZSTD": "Zstd",
		"EStarGZ": "", "ESTARGZ": "EStarGZ", "Uncompressed": "", "UNCOMPRESSED": "Uncompressed"})

	file := s.Types.Get("File")
	assert.Assert(t, file != nil)
	for _, f := range file.Fields {
		if f.Name == "export" {
			assert.Check(t, is.Equal(f.TypeRef.OfType.Kind, introspection.TypeKindScalar))
			return
		}
	}
	t.Fatal("File has no export field")
}

func TestGoVersionsAboveTheEngines(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module dagger/opm\n\ngo 1.25.4\n"), 0o644))
	problems, err := goVersions(dir, "1.25.3")
	assert.NilError(t, err)
	assert.DeepEqual(t, problems, []string{"dagger/opm needs go 1.25.4 but the engine builds modules with go 1.25.3: lower its go line (or pick an older version of it)"})

	problems, err = goVersions(dir, "1.25.4")
	assert.NilError(t, err)
	assert.Check(t, is.Len(problems, 0))
}
