package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestFirstSessionErrors is the errors a new user meets first, each with
// what went wrong, where (file:line or flag) and what to type. Every case
// starts from a copy of examples/ with one mistake.
func TestFirstSessionErrors(t *testing.T) {
	type tc struct {
		mistake func(t *testing.T, dir string) // edits the copy of examples/
		args    []string                       // after DIR
		code    int
		want    []string // substrings of stderr; "DIR" stands for the directory
	}
	cases := map[string]tc{
		"empty directory": {
			mistake: func(t *testing.T, dir string) {
				assert.NilError(t, os.RemoveAll(dir))
				assert.NilError(t, os.Mkdir(dir, 0o755))
			},
			code: 2,
			want: []string{"is not a CUE module", "cue.mod/module.cue is missing", "start a deployment directory with `opm init DIR`"},
		},
		"a subdirectory of the deployment": {
			// cue.mod one level up: DIR is a subdirectory of the deployment.
			mistake: func(t *testing.T, dir string) {
				assert.NilError(t, os.Rename(filepath.Join(dir, "cue.mod"), filepath.Join(filepath.Dir(dir), "cue.mod")))
			},
			code: 2,
			want: []string{"DIR is not a deployment directory, but it is inside one: ", " (it holds cue.mod/); pass that directory instead (for example: opm render "},
		},
		"a -f file that does not exist": {
			mistake: func(t *testing.T, dir string) {},
			args:    []string{"--env", "staging", "--release", "blog", "-f", "values/nope.yaml"},
			code:    2,
			want:    []string{`values file "values/nope.yaml" (-f/--values) does not exist: the path is relative to the working directory, not to the deployment directory`},
		},
		"cue.mod but no package": {
			mistake: func(t *testing.T, dir string) {
				for _, f := range []string{"deploy.cue", "environments.cue", "releases.cue"} {
					assert.NilError(t, os.Remove(filepath.Join(dir, f)))
				}
			},
			code: 2,
			want: []string{"no CUE file of a package", "package deploy", "core.#ModuleRelease"},
		},
		"stray package file": {
			mistake: func(t *testing.T, dir string) { write(t, dir, "notes.cue", "package scratch\n\nx: 1\n") },
			code:    2,
			want:    []string{`"deploy" (deploy.cue) and "scratch" (notes.cue)`, "must declare the same package"},
		},
		"release shadows its module import": {
			mistake: func(t *testing.T, dir string) { edit(t, dir, "releases.cue", "blogmod", "blog") },
			args:    []string{"--env", "staging"},
			code:    2,
			want: []string{
				`import "opmodel.dev/examples/modules/blog" as blog is shadowed`, "DIR/releases.cue:9:11", "field releases.blog (DIR/releases.cue:8:11)",
				`import blogmod "opmodel.dev/examples/modules/blog"`, "CUE says:", `imported and not used: "opmodel.dev/examples/modules/blog" as blog`,
			},
		},
		"release without #module": {
			mistake: func(t *testing.T, dir string) {
				edit(t, dir, "releases.cue", "\tminecraftmod \"opmodel.dev/examples/modules/minecraft\"\n", "")
				edit(t, dir, "releases.cue", "#module: minecraftmod", "")
			},
			args: []string{"--env", "staging"},
			code: 2,
			want: []string{`release "minecraft" in environment "staging" (at DIR/releases.cue:16:11) has no module`, "releases: minecraft: #module: minecraftmod"},
		},
		"module without #components": {
			mistake: func(t *testing.T, dir string) {
				b, err := os.ReadFile(filepath.Join(dir, "modules/blog/blog.cue"))
				assert.NilError(t, err)
				s := string(b)
				i := strings.Index(s, "#components: {")
				assert.Assert(t, i > 0)
				write(t, dir, "modules/blog/blog.cue", s[:i]) // #components is the last field
			},
			args: []string{"--env", "staging", "-r", "blog"},
			code: 2,
			want: []string{`module "blog" (opmodel.dev/examples/modules/blog@v0) declares no #components`, "core.#Workload"},
		},
		"environment typo": {
			args: []string{"--env", "stagin"},
			code: 2,
			want: []string{`environment "stagin" is not declared`, `did you mean "staging"?`, "environments: production, staging"},
		},
		"release typo": {
			args: []string{"--env", "staging", "-r", "minecrat"},
			code: 2,
			want: []string{`release "minecrat" is not declared`, `did you mean "minecraft"?`},
		},
		"values file of another format": {
			mistake: func(t *testing.T, dir string) { write(t, dir, "prod.toml", "replicas = 2\n") },
			args:    []string{"--env", "staging", "-r", "blog", "-f", "DIR/prod.toml"},
			code:    2,
			want:    []string{`unknown format ".toml"`, "use .cue, .json, .yaml or .yml"},
		},
		"values file that is a list": {
			mistake: func(t *testing.T, dir string) { write(t, dir, "v.yaml", "- replicas: 2\n") },
			args:    []string{"--env", "staging", "-r", "blog", "-f", "DIR/v.yaml"},
			code:    2,
			want:    []string{"DIR/v.yaml", "values must be a struct", "replicas: 2"},
		},
		"values file with a syntax error": {
			mistake: func(t *testing.T, dir string) { write(t, dir, "v.yaml", "replicas: 2\nimage: a: b\n") },
			args:    []string{"--env", "staging", "-r", "blog", "-f", "DIR/v.yaml"},
			code:    2,
			want:    []string{"DIR/v.yaml:2"},
		},
		"values file for two releases": {
			mistake: func(t *testing.T, dir string) { write(t, dir, "v.yaml", "replicas: 2\n") },
			args:    []string{"--env", "staging", "-f", "DIR/v.yaml"},
			code:    2,
			want:    []string{"-f values files apply to exactly one release", "add --release NAME"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "deploy")
			copyTree(t, "../../examples", dir)
			if c.mistake != nil {
				c.mistake(t, dir)
			}
			args := append([]string{"render", dir}, c.args...)
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "DIR", dir)
			}
			code, out, errOut := runOpm(t, args...)
			assert.Equal(t, code, c.code, errOut)
			assert.Equal(t, out, "")
			for _, w := range c.want {
				assert.Check(t, is.Contains(errOut, strings.ReplaceAll(w, "DIR", dir)))
			}
		})
	}
}

// A kubeconfig that lacks the environment's context: exit 3 (the cluster
// cannot be selected), naming the context, the file, the contexts there,
// the one probably meant, and how to add it.
func TestKubeconfigWithoutTheEnvironmentsContext(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	write(t, filepath.Dir(kc), "kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: productoin, context: {cluster: c, user: u}}, {name: dev, context: {cluster: c, user: u}}]
current-context: dev
`)
	code, out, errOut := runOpm(t, "diff", "../../examples", "--env", "production", "--kubeconfig", kc)
	assert.Equal(t, code, 3, errOut)
	// Said under each release (stdout), counted once on stderr.
	for _, w := range []string{`environment "production" names kubeContext "production", which is not in`, kc, `did you mean "productoin"?`, "contexts there: dev, productoin", "kubectl config set-context production"} {
		assert.Check(t, is.Contains(out, w))
	}
	assert.Check(t, is.Contains(errOut, "2 of 2 releases could not be compared"))
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
}

func edit(t *testing.T, dir, name, old, new string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(b), old), "%s has no %q", name, old)
	write(t, dir, name, strings.ReplaceAll(string(b), old, new))
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	assert.NilError(t, os.CopyFS(to, os.DirFS(from)))
}

// A values file's typo points at the file's own line and suggests the
// #config field meant; nothing points at the engine's merged values.
func TestValuesTypoPointsAtTheValuesFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deploy")
	copyTree(t, "../../examples", dir)
	write(t, dir, "prod.yaml", "image: ghcr.io/example/blog:2\nreplicaz: 2\n")
	code, _, errOut := runOpm(t, "render", dir, "--env", "staging", "-r", "blog", "-f", filepath.Join(dir, "prod.yaml"))
	assert.Equal(t, code, 2, errOut)
	assert.Check(t, is.Contains(errOut, `values.replicaz (set by file "`+filepath.Join(dir, "prod.yaml")+`"; did you mean "replicas"?): field not allowed`))
	assert.Check(t, is.Contains(errOut, filepath.Join(dir, "prod.yaml")+":2:1"))
	assert.Check(t, !strings.Contains(errOut, "merged-values"), "%s", errOut)
}

// A team provider's resource is as strict as the catalog's: a misspelled
// field of its #spec is an error at the module's line, with the name meant.
func TestTeamProviderSpecIsStrict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shop")
	copyTree(t, "../../examples/shop", dir)
	edit(t, dir, "modules/shop/shop.cue", `secretName: "frontend-tls"`, `secretNam: "frontend-tls"`)
	code, _, errOut := runOpm(t, "render", dir, "--env", "staging")
	assert.Equal(t, code, 2, errOut)
	assert.Check(t, is.Contains(errOut, `spec.tls.secretNam: field not allowed; did you mean "secretName"?`))
	assert.Check(t, is.Contains(errOut, filepath.Join(dir, "modules/shop/shop.cue")+":114:"))
}

// The examples are what users copy: they render without a warning.
func TestExamplesRenderWithoutWarnings(t *testing.T) {
	for _, dir := range []string{"../../examples", "../../examples/shop"} {
		for _, env := range []string{"staging", "production"} {
			code, _, errOut := runOpm(t, "render", dir, "--env", env)
			assert.Equal(t, code, 0, errOut)
			assert.Check(t, !strings.Contains(errOut, "warning:"), "%s %s: %s", dir, env, errOut)
		}
	}
}

// opm rbac needs an environment: the identity comes from it.
func TestRBACNeedsAnEnvironment(t *testing.T) {
	code, _, errOut := runOpm(t, "rbac", "../../examples")
	assert.Equal(t, code, 2, errOut)
	assert.Check(t, is.Contains(errOut, "rbac needs --env"))
}
