package pipeline_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// soundRepo is a git repository holding a deployment directory deploy/
// and beside it shared/values.yaml, committed on main,
// then on branch feature with edit applied and committed. It returns the
// deployment directory.
func soundRepo(t *testing.T, body string, edit func(root string)) string {
	t.Helper()
	return soundRepoWith(t, body, nil, edit)
}

// soundRepoWith is soundRepo with more files (path in the deployment
// directory → content) in the base commit.
func soundRepoWith(t *testing.T, body string, files map[string]string, edit func(root string)) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "deploy")
	reviewCopyDir(t, deploytest.HealthyDir(t, body), dir)
	assert.NilError(t, os.MkdirAll(filepath.Join(root, "shared"), 0o755))
	for name, content := range files {
		p := filepath.Join(dir, name)
		if name == "../shared-link" {
			assert.NilError(t, os.Symlink("shared", p)) // a committed link to shared/
			continue
		}
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	assert.NilError(t, os.MkdirAll(filepath.Join(root, "shared"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(root, "shared", "values.yaml"), []byte("stamp: one\n"), 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "dev.yaml"), []byte("stamp: one\n"), 0o644))
	gitRun(t, root, "init", "-q", "-b", "main")
	gitRun(t, root, "add", "-A")
	gitRun(t, root, "commit", "-q", "-m", "base")
	gitRun(t, root, "checkout", "-q", "-b", "feature")
	edit(root)
	gitRun(t, root, "add", "-A")
	gitRun(t, root, "commit", "-q", "-m", "change")
	return dir
}

// outcome is a review's result in a form both paths give alike: a pair
// the fast path did not render is one the full path found all unchanged.
func outcome(t *testing.T, cs *pipeline.ChangeSet) string {
	t.Helper()
	type pair struct {
		Release, Environment string
		Error                string
		Objects              []pipeline.ObjectChange
		Counts               pipeline.Counts
		Head                 pipeline.Revision
		Base                 *pipeline.Revision
	}
	var out []pair
	for _, r := range cs.Releases {
		if r.Error == "" && !r.Counts.Changed() {
			continue // unchanged: the fast path lists it under Unchanged
		}
		out = append(out, pair{r.Name, r.Environment, r.Error, r.Objects, r.Counts, r.Head, r.Base})
	}
	slices.SortFunc(out, func(a, b pair) int { return strings.Compare(a.Release+a.Environment, b.Release+b.Environment) })
	b, err := json.MarshalIndent(out, "", " ")
	assert.NilError(t, err)
	return string(b)
}

// fastEqualsFull reviews dir against main both ways and checks they
// agree; it returns the fast review.
func fastEqualsFull(t *testing.T, dir string) *pipeline.ChangeSet {
	t.Helper()
	fast, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}})
	assert.NilError(t, err)
	full, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoSkip: true})
	assert.NilError(t, err)
	assert.Equal(t, outcome(t, fast), outcome(t, full))
	return fast
}

const soundBody = `
environments: dev: {namespace: "dev", valuesFiles: ["../shared/values.yaml"]}
releases: app: #module: appmodule
`

// A values file beside the deployment directory, in the same repository:
// the fast review reads the base's from git too, and sees the change.
func TestFastReviewReadsValuesFilesOutsideTheDirectory(t *testing.T) {
	dir := soundRepo(t, soundBody, func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "shared", "values.yaml"), []byte("stamp: two\n"), 0o644))
	})
	fast := fastEqualsFull(t, dir)
	assert.Assert(t, fast.Counts.Changed(), "the change to ../shared/values.yaml was not seen")
	assert.Equal(t, len(fast.Unchanged), 0)
}

// Git attributes configured for the user (not in the repository) change
// what a checkout writes: the fast review must agree with the checkout.
func TestFastReviewHonoursTheUsersGitAttributes(t *testing.T) {
	home := t.TempDir()
	assert.NilError(t, os.MkdirAll(filepath.Join(home, "git"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(home, "git", "attributes"), []byte("*.yaml filter=shout\n"), 0o644))
	cfg := filepath.Join(home, "gitconfig")
	assert.NilError(t, os.WriteFile(cfg, []byte("[filter \"shout\"]\n\tsmudge = sed s/one/ONE/\n\tclean = cat\n"), 0o644))
	dir := soundRepo(t, `
environments: dev: {namespace: "dev", valuesFiles: ["dev.yaml"]}
releases: app: #module: appmodule
`, func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "deploy", "README.md"), []byte("unrelated\n"), 0o644))
	})
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	fastEqualsFull(t, dir)
}

// Hidden fields and definitions under environments are never
// environments, on either path.
func TestReviewIgnoresHiddenEnvironmentFields(t *testing.T) {
	dir := soundRepo(t, `
environments: {
	_common: {valuesFiles: ["../shared/values.yaml"]}
	#Shape: namespace: string
	dev: _common & {namespace: "dev"}
}
releases: app: #module: appmodule
`, func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "shared", "values.yaml"), []byte("stamp: two\n"), 0o644))
	})
	fast := fastEqualsFull(t, dir)
	for _, r := range fast.Releases {
		assert.Equal(t, r.Environment, "dev")
	}
	assert.Assert(t, fast.Counts.Changed(), "the hidden helper's values file is read")
}
