package pipeline_test

import (
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// reviewDirs copies examples/ twice, as the base and the head of a
// review, applies edit to the head (and baseEdit, if any, to both first)
// and returns both directories.
func reviewDirs(t *testing.T, baseEdit, headEdit func(dir string)) (base, head string) {
	t.Helper()
	root := t.TempDir()
	base, head = filepath.Join(root, "base"), filepath.Join(root, "head")
	for _, d := range []string{base, head} {
		reviewCopyDir(t, "../examples", d)
		if baseEdit != nil {
			baseEdit(d)
		}
	}
	if headEdit != nil {
		headEdit(head)
	}
	return base, head
}

func reviewCopyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	assert.NilError(t, err)
}

// reviewEdit replaces old with new in dir/file, failing if old is absent.
func reviewEdit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(b), old), "%s does not contain %q", file, old)
	assert.NilError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

func reviewAppend(t *testing.T, dir, file, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	assert.NilError(t, err)
	_, err = f.WriteString(text)
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
}

// Scenario edits, shared with the Markdown golden tests.

func renameMinecraft(t *testing.T) func(string) {
	return func(dir string) {
		reviewEdit(t, dir, "releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	}
}

// moveSettings moves the blog's ConfigMap from component api to a new
// component settings: same object, another component.
func moveSettings(t *testing.T) func(string) {
	return func(dir string) {
		f := "modules/blog/blog.cue"
		reviewEdit(t, dir, f, "\t\t\tconfigs: \"blog-api-settings\": data: {\n\t\t\t\t\"log-level\": #config.logLevel\n\t\t\t\t\"title\":     #config.title\n\t\t\t}\n", "")
		reviewAppend(t, dir, f, "\n#components: settings: {\n\tcore.#Configs\n\tspec: configs: \"blog-api-settings\": data: {\n\t\t\"log-level\": #config.logLevel\n\t\t\"title\":     #config.title\n\t}\n}\n")
	}
}

// Secret values used by the Secret scenario; none may appear in any output.
const (
	reviewOldPassword = "old-db-password-1f9a"
	reviewNewPassword = "new-db-password-77c2"
	reviewAPIKey      = "unchanged-api-key-5d3e"
)

func blogSecret(password string) func(string) {
	return func(dir string) {
		f, err := os.OpenFile(filepath.Join(dir, "modules/blog/blog.cue"), os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		if _, err := f.WriteString("\n#components: api: {core.#Secrets, spec: secrets: \"blog-db\": data: {password: \"" + password + "\", apiKey: \"" + reviewAPIKey + "\"}}\n"); err != nil {
			panic(err)
		}
	}
}

func reviewSecretMaterial() []string {
	var out []string
	for _, s := range []string{reviewOldPassword, reviewNewPassword, reviewAPIKey} {
		out = append(out, s, base64.StdEncoding.EncodeToString([]byte(s)))
	}
	return out
}

func review(t *testing.T, base, head string, opts pipeline.ReviewOptions) *pipeline.ChangeSet {
	t.Helper()
	opts.Dir, opts.BaseDir = head, base
	cs, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	return cs
}

func findRelease(t *testing.T, cs *pipeline.ChangeSet, name, env string) pipeline.ReleaseChanges {
	t.Helper()
	for _, r := range cs.Releases {
		if r.Name == name && r.Environment == env {
			return r
		}
	}
	t.Fatalf("release %s/%s not in the change set", name, env)
	return pipeline.ReleaseChanges{}
}

func objectsBy(r pipeline.ReleaseChanges, ch pipeline.Change) []string {
	var out []string
	for _, o := range r.Objects {
		if o.Action == ch {
			out = append(out, o.Ref.Kind+"/"+o.Ref.Name)
		}
	}
	return out
}

// Nothing changed: nothing is rendered, every release × environment is
// listed as unchanged; with NoSkip each is rendered on both sides, and
// the renders agree.
func TestReviewNoChange(t *testing.T) {
	base, head := reviewDirs(t, nil, nil)
	quick := review(t, base, head, pipeline.ReviewOptions{})
	assert.Equal(t, len(quick.Releases), 0)
	assert.DeepEqual(t, quick.Unchanged, []pipeline.UnchangedRelease{
		{Release: "blog", Environment: "production"}, {Release: "minecraft", Environment: "production"},
		{Release: "blog", Environment: "staging"}, {Release: "minecraft", Environment: "staging"},
	})
	cs := review(t, base, head, pipeline.ReviewOptions{NoSkip: true})
	assert.Equal(t, len(cs.Unchanged), 0)
	assert.Equal(t, len(cs.Releases), 4, "2 releases × 2 environments")
	var envs []string
	for _, r := range cs.Releases {
		envs = append(envs, r.Environment+"/"+r.Name)
		assert.Equal(t, r.Error, "")
		assert.Assert(t, r.Base != nil)
		assert.Equal(t, *r.Base, r.Head, "same content, same digest and change id")
		assert.Assert(t, strings.HasPrefix(r.Head.ChangeID, "change-sha1-"))
		assert.Equal(t, r.Counts.Unchanged, len(r.Objects))
		for _, o := range r.Objects {
			assert.Equal(t, o.Diff, "")
		}
	}
	assert.DeepEqual(t, envs, []string{"production/blog", "production/minecraft", "staging/blog", "staging/minecraft"})
	assert.Assert(t, !cs.Counts.Changed())
	assert.Equal(t, cs.Counts.Unchanged, 16, "blog 5 + minecraft 3, twice")
}

func TestReviewRenameMakesStaleSet(t *testing.T) {
	base, head := reviewDirs(t, nil, renameMinecraft(t))
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}})
	// The rename is in the root package, which every release reads: both
	// are rendered.
	assert.Equal(t, len(cs.Releases), 2)
	assert.Equal(t, len(cs.Unchanged), 0)
	mc := findRelease(t, cs, "minecraft", "staging")
	assert.DeepEqual(t, objectsBy(mc, pipeline.Added), []string{"PersistentVolumeClaim/minecraft-server-data", "Service/minecraft-server", "StatefulSet/minecraft-server"})
	// Stale in delete order: reverse apply order.
	assert.DeepEqual(t, objectsBy(mc, pipeline.Stale), []string{"StatefulSet/minecraft", "Service/minecraft", "PersistentVolumeClaim/minecraft-data"})
	assert.Equal(t, mc.Counts, pipeline.Counts{Added: 3, Stale: 3})
	assert.Assert(t, mc.Base.ChangeID != mc.Head.ChangeID)
	assert.Assert(t, mc.Base.ManifestDigest != mc.Head.ManifestDigest)

	for _, o := range mc.Objects {
		switch {
		case o.Ref.Kind == "PersistentVolumeClaim" && o.Action == pipeline.Stale:
			assert.Assert(t, is.Contains(o.Warning, "--prune-pvcs"))
			assert.Assert(t, is.Contains(o.Diff, "-  name: minecraft-data"))
		case o.Action == pipeline.Stale:
			assert.Equal(t, o.Warning, "")
			assert.Assert(t, is.Contains(o.Diff, "--- base/"))
		case o.Action == pipeline.Added:
			assert.Assert(t, is.Contains(o.Diff, "+kind: "+o.Ref.Kind))
		}
	}
	assert.Equal(t, len(mc.Warnings), 1)
	assert.Assert(t, is.Contains(mc.Warnings[0], "PersistentVolumeClaim/staging/minecraft-data is no longer rendered; apply keeps it"))

	blog := findRelease(t, cs, "blog", "staging")
	assert.Equal(t, blog.Counts, pipeline.Counts{Unchanged: 5})
	assert.Equal(t, cs.Counts, pipeline.Counts{Added: 3, Stale: 3, Unchanged: 5})

	// With --prune-pvcs the warning says the data goes.
	cs = review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}, Selection: pipeline.Selection{Releases: []string{"minecraft"}}, Protection: pipeline.Protection{PrunePVCs: true}})
	assert.Equal(t, len(cs.Releases), 1)
	assert.Assert(t, is.Contains(cs.Releases[0].Warnings[0], "would be pruned"))
}

func TestReviewComponentRenameIsNotStale(t *testing.T) {
	base, head := reviewDirs(t, nil, moveSettings(t))
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"production"}, Selection: pipeline.Selection{Releases: []string{"blog"}}})
	blog := findRelease(t, cs, "blog", "production")
	assert.Equal(t, blog.Counts.Stale, 0, "the ConfigMap is still rendered, by another component")
	assert.DeepEqual(t, objectsBy(blog, pipeline.Modified), []string{"ConfigMap/blog-api-settings"})
	for _, o := range blog.Objects {
		if o.Action == pipeline.Modified {
			assert.Equal(t, o.Ref.Component, "settings", "the head's component")
			assert.Assert(t, is.Contains(o.Diff, "+    component.opmodel.dev/name: settings"))
		}
	}
	assert.Assert(t, blog.Base.ManifestDigest != blog.Head.ManifestDigest)
}

func TestReviewMasksSecrets(t *testing.T) {
	base, head := reviewDirs(t, blogSecret(reviewOldPassword), nil)
	reviewEdit(t, head, "modules/blog/blog.cue", reviewOldPassword, reviewNewPassword)
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}, Selection: pipeline.Selection{Releases: []string{"blog"}}})
	blog := findRelease(t, cs, "blog", "staging")
	assert.DeepEqual(t, objectsBy(blog, pipeline.Modified), []string{"Secret/blog-db"})
	var d string
	for _, o := range blog.Objects {
		d += o.Diff
	}
	for _, s := range reviewSecretMaterial() {
		assert.Assert(t, !strings.Contains(d, s), "secret material %q in a diff", s)
	}
	assert.Assert(t, is.Contains(d, "-  password: (masked, hmac:"))
	assert.Assert(t, is.Contains(d, "+  password: (masked, hmac:"))
	assert.Assert(t, is.Regexp(`\n   apiKey: \(masked, hmac:[0-9a-f]{12}\)\n`, d), "an unchanged value is an equal context line")
}

func TestReviewReleaseOnlyOnOneSide(t *testing.T) {
	base, head := reviewDirs(t, nil, func(dir string) {
		// The head drops minecraft and adds blog2.
		reviewEdit(t, dir, "releases.cue", "releases: minecraft: {", "releases: blog2: {\n\t#module: blogmod\n\tvalues: {image: \"b:1\", apiImage: \"a:1\"}\n}\n\n_unused: {")
	})
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}})
	var names []string
	for _, r := range cs.Releases {
		names = append(names, r.Name)
	}
	assert.DeepEqual(t, names, []string{"blog", "blog2", "minecraft"})

	added := findRelease(t, cs, "blog2", "staging")
	assert.Assert(t, added.Base == nil, "no base revision for a new release")
	assert.Equal(t, added.Counts, pipeline.Counts{Added: 5})
	assert.Assert(t, added.Head.ChangeID != "")

	gone := findRelease(t, cs, "minecraft", "staging")
	assert.Assert(t, gone.Base != nil)
	assert.Equal(t, gone.Head, pipeline.Revision{})
	assert.Equal(t, gone.Counts, pipeline.Counts{Stale: 3})
	assert.Equal(t, gone.Namespace, "staging")
	assert.Assert(t, is.Contains(strings.Join(gone.Warnings, "\n"), "not declared in the head"))
	assert.Assert(t, is.Contains(strings.Join(gone.Warnings, "\n"), "opm delete --name minecraft -n staging"))
}

func TestReviewRenderErrorIsPerRelease(t *testing.T) {
	base, head := reviewDirs(t, nil, func(dir string) {
		reviewEdit(t, dir, "releases.cue", `difficulty: "normal"`, `difficulty: "impossible"`)
	})
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}})
	mc := findRelease(t, cs, "minecraft", "staging")
	assert.Assert(t, is.Contains(mc.Error, "rendering the head"))
	assert.Equal(t, len(mc.Objects), 0)
	blog := findRelease(t, cs, "blog", "staging")
	assert.Equal(t, blog.Error, "")
	assert.Equal(t, blog.Counts, pipeline.Counts{Unchanged: 5})
}

func TestReviewEmptyRenderWarns(t *testing.T) {
	base, head := reviewDirs(t, nil, func(dir string) {
		assert.NilError(t, os.MkdirAll(filepath.Join(dir, "modules/empty"), 0o755))
		assert.NilError(t, os.WriteFile(filepath.Join(dir, "modules/empty/empty.cue"), []byte(`package empty

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion: "opmodel.dev/examples/modules/empty@v0"
	name:       "empty"
	version:    "0.1.0"
}

#config: {...}
#components: {}
`), 0o644))
		reviewEdit(t, dir, "releases.cue", "import (", "import (\n\temptymodule \"opmodel.dev/examples/modules/empty\"")
		reviewEdit(t, dir, "releases.cue", "#module: blogmod", "#module: emptymodule")
		reviewAppend(t, dir, "releases.cue", "\n_keepImport: blogmod.metadata.name\n")
	})
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}, Selection: pipeline.Selection{Releases: []string{"blog"}}})
	blog := findRelease(t, cs, "blog", "staging")
	assert.Equal(t, blog.Error, "")
	assert.Equal(t, blog.Counts, pipeline.Counts{Stale: 5})
	assert.Assert(t, is.Contains(strings.Join(blog.Warnings, "\n"), "renders no objects"))
	assert.Assert(t, is.Contains(strings.Join(blog.Warnings, "\n"), "refuses without --force"), "the same rule as apply")
}

func TestDeclaredEnvironments(t *testing.T) {
	envs, err := pipeline.DeclaredEnvironments(t.Context(), "../examples")
	assert.NilError(t, err)
	assert.DeepEqual(t, envs, []string{"production", "staging"})
	_, err = pipeline.DeclaredEnvironments(t.Context(), filepath.Join(t.TempDir(), "absent"))
	assert.ErrorContains(t, err, "does not exist")
}

func TestReviewNewDeployment(t *testing.T) {
	_, head := reviewDirs(t, nil, nil)
	cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: filepath.Join(t.TempDir(), "absent")})
	assert.NilError(t, err)
	assert.Equal(t, len(cs.Releases), 4)
	assert.Equal(t, cs.Counts, pipeline.Counts{Added: 16})
	for _, r := range cs.Releases {
		assert.Assert(t, r.Base == nil)
	}
}

func TestReviewSelectionErrors(t *testing.T) {
	base, head := reviewDirs(t, nil, nil)
	_, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base, Environments: []string{"qa"}})
	assert.ErrorContains(t, err, `environment "qa"`)
	_, err = pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head, Releases: []string{"nope"}}, BaseDir: base})
	assert.ErrorContains(t, err, `release "nope"`)
	_, err = pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: filepath.Join(head, "missing")}, BaseDir: filepath.Join(base, "missing")})
	assert.ErrorContains(t, err, "does not exist")

	// Selection.Environment stands in for Environments.
	cs := review(t, base, head, pipeline.ReviewOptions{Selection: pipeline.Selection{Environment: "production"}})
	for _, r := range cs.Releases {
		assert.Equal(t, r.Environment, "production")
	}
}

func TestReviewBrokenBaseStillReviews(t *testing.T) {
	base, head := reviewDirs(t, nil, nil)
	reviewAppend(t, base, "releases.cue", "\nthis is not cue\n")
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}})
	assert.Equal(t, len(cs.Releases), 2)
	for _, r := range cs.Releases {
		assert.Assert(t, is.Contains(r.Error, "loading the base"))
	}
}

// A review lists where each release writes and flags a change of it: here
// the head moves blog into a namespace of its own.
func TestReviewShowsAndFlagsReach(t *testing.T) {
	base, head := reviewDirs(t, nil, func(dir string) {
		reviewAppend(t, dir, "releases.cue", "\nreleases: blog: metadata: namespace: \"blog\"\n")
	})
	cs := review(t, base, head, pipeline.ReviewOptions{Environments: []string{"staging"}})
	blog := findRelease(t, cs, "blog", "staging")
	assert.DeepEqual(t, blog.BaseReach, &pipeline.Footprint{Namespaces: []string{"staging"}})
	assert.DeepEqual(t, blog.Reach, &pipeline.Footprint{Namespaces: []string{"blog"}})
	assert.Check(t, is.Contains(strings.Join(blog.Warnings, "\n"), "this change moves where release blog writes: namespaces staging → namespaces blog"))
	mc := findRelease(t, cs, "minecraft", "staging")
	assert.DeepEqual(t, mc.Reach, mc.BaseReach)

	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Check(t, is.Contains(md, "| blog | staging | blog (writes to ⚠️ `staging` → `blog`) |"))
	// Where a release writes only to its namespace, the cell says just that.
	assert.Check(t, is.Contains(md, "| minecraft | staging | staging | "))
	assert.Check(t, !strings.Contains(md, "| minecraft | staging | staging (writes to"), md)
	assert.Check(t, is.Contains(report.Text(cs, false), "  writes to namespaces blog\n"))
}

// A review against a git ref reads the base from git's object store (no
// checkout) and renders only what changed; the result is the one a
// checkout of the base and a render of every pair give (NoSkip).
func TestGitReviewReadsTheBaseFromObjects(t *testing.T) {
	base, _ := reviewDirs(t, nil, nil)
	gitRun(t, base, "init", "-q", "-b", "main")
	gitRun(t, base, "add", "-A")
	gitRun(t, base, "commit", "-q", "-m", "base")
	gitRun(t, base, "checkout", "-q", "-b", "feature")
	renameMinecraft(t)(base)
	moveSettings(t)(base)
	gitRun(t, base, "commit", "-qam", "change")

	quick, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: base}, BaseRefs: []string{"main"}})
	assert.NilError(t, err)
	full, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: base}, BaseRefs: []string{"main"}, NoSkip: true})
	assert.NilError(t, err)
	assert.Equal(t, quick.BaseCommit, full.BaseCommit)
	assert.Equal(t, len(quick.Releases), len(full.Releases))
	for i := range full.Releases {
		q, f := quick.Releases[i], full.Releases[i]
		assert.Equal(t, q.Error, "")
		assert.DeepEqual(t, q.Head, f.Head)
		assert.DeepEqual(t, q.Base, f.Base)
		assert.DeepEqual(t, q.Counts, f.Counts)
	}
	assert.Assert(t, quick.Counts.Changed())
}

// The first pull request of a service repository: the base commit holds a
// README and no deployment (no cue.mod), the head adds one at the root.
// Every release is reported added, by the fast path and with --no-skip
// alike, and nothing errs.
func TestFirstPullRequestOfARepositoryIsAllAdded(t *testing.T) {
	dir := deploytest.HealthyDir(t, `
environments: dev: namespace: "dev"
releases: app: #module: appmodule
`)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("a service\n"), 0o644))
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "README.md")
	gitRun(t, dir, "commit", "-q", "-m", "readme")
	gitRun(t, dir, "checkout", "-q", "-b", "feature")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "the deployment")
	for _, noSkip := range []bool{false, true} {
		cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoSkip: noSkip, NoCache: true})
		assert.NilError(t, err, "no-skip %v", noSkip)
		assert.Equal(t, len(cs.Releases), 1)
		rc := cs.Releases[0]
		assert.Equal(t, rc.Error, "")
		assert.Check(t, rc.Base == nil, "no-skip %v: a base where there was none: %+v", noSkip, rc.Base)
		assert.Check(t, rc.Counts.Added > 0 && rc.Counts.Modified == 0, "no-skip %v: %+v", noSkip, rc.Counts)
	}
}

// What apply would refuse before validating it — a quantity "512mb" the
// API's types cannot hold — the review says already, naming the field,
// the value and the values file that set it.
func TestReviewSaysWhatApplyWouldRefuse(t *testing.T) {
	dir := deploytest.Write(t, map[string]string{
		"app/app.cue": `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: memory: string

#components: web: {
	core.#Workload
	spec: workload: {type: "stateless", container: {image: "nginx:1.27", resources: requests: memory: #config.memory}}
}
`,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: prod: {namespace: "prod", valuesFiles: ["values/prod.yaml"]}
releases: app: #module: appmodule
`,
		"values/prod.yaml": "# production\nmemory: 512Mi\n",
	})
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "a")
	gitRun(t, dir, "checkout", "-q", "-b", "feature")
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "values/prod.yaml"), []byte("# production\nmemory: 512mb\n"), 0o644))
	gitRun(t, dir, "commit", "-qam", "more memory")
	cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoCache: true})
	assert.NilError(t, err)
	warnings := strings.Join(cs.Releases[0].Warnings, "\n")
	assert.Check(t, strings.Contains(warnings, `apply would refuse Deployment.apps/prod/web: field spec.template.spec.containers[0].resources.requests[memory] = "512mb" is not`), warnings)
	assert.Check(t, strings.Contains(warnings, `from file "values/prod.yaml" at values/prod.yaml:2:1`), "the values file and line are not named, relative to the repository:\n%s", warnings)
	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Check(t, strings.Contains(md, "apply would refuse"), "the PR comment does not say it:\n%s", md)
}

// A values change that moves the change ID and no object is not "no
// changes" without a word: the review names the values that changed and
// why nothing moved.
func TestReviewSaysWhyAValuesChangeMovesNothing(t *testing.T) {
	dir := deploytest.Write(t, map[string]string{
		"app/app.cue": `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {replicas: *1 | int, autoscaling: *true | bool}

#components: web: {
	core.#Workload
	spec: workload: {
		type: "stateless"
		// The autoscaler decides while it is on.
		if !#config.autoscaling {replicas: #config.replicas}
		container: image: "nginx:1.27"
	}
}
`,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: prod: {namespace: "prod", values: replicas: 2}
releases: app: #module: appmodule
`,
	})
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "a")
	gitRun(t, dir, "checkout", "-q", "-b", "feature")
	setValues(t, dir, "values: replicas: 2", "values: replicas: 5")
	gitRun(t, dir, "commit", "-qam", "more replicas")
	cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoCache: true})
	assert.NilError(t, err)
	rc := cs.Releases[0]
	assert.Assert(t, rc.Base != nil && rc.Base.ChangeID != rc.Head.ChangeID, "the change ID moves")
	assert.Equal(t, rc.Counts.Modified+rc.Counts.Added+rc.Counts.Stale, 0)
	warnings := strings.Join(rc.Warnings, "\n")
	assert.Check(t, strings.Contains(warnings, "values.replicas changed, but no object did: nothing release app renders in environment prod uses them"), warnings)
	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Check(t, strings.Contains(md, "values.replicas changed, but no object did"), md)
}
