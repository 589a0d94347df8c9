package pipeline_test

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/pipeline"
)

// The base of a review is read from git's objects with its CUE files in
// memory; every reader of the base reads those files as the commit holds
// them: values files in CUE, @embed globs that match CUE files.

// A values file written in CUE is read from the base commit: an edit is
// seen, as the full review (a checkout) sees it.
func TestFastReviewReadsCUEValuesFilesOfTheBase(t *testing.T) {
	dir := soundRepoWith(t, `
environments: dev: {namespace: "dev", valuesFiles: ["values/dev.cue"]}
releases: app: #module: appmodule
`, map[string]string{"values/dev.cue": "stamp: \"one\"\n"}, func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "deploy", "values", "dev.cue"), []byte("stamp: \"two\"\n"), 0o644))
	})
	fast := fastEqualsFull(t, dir)
	assert.Assert(t, fast.Counts.Changed(), "the edit of values/dev.cue was not seen: %+v", fast.Releases)
	for _, r := range fast.Releases {
		assert.Check(t, is.Equal(r.Error, ""), "%s/%s", r.Name, r.Environment)
	}
}

// A head that deletes the CUE values file its environment names cannot
// render: the pair is an error, never skipped as unchanged.
func TestReviewOfADeletedCUEValuesFileIsNoSkip(t *testing.T) {
	dir := soundRepoWith(t, `
environments: dev: {namespace: "dev", valuesFiles: ["values/dev.cue"]}
releases: app: #module: appmodule
`, map[string]string{"values/dev.cue": "stamp: \"one\"\n"}, func(root string) {
		assert.NilError(t, os.Remove(filepath.Join(root, "deploy", "values", "dev.cue")))
	})
	cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}})
	assert.NilError(t, err)
	assert.Equal(t, len(cs.Unchanged), 0, "skipped as unchanged: %+v", cs.Unchanged)
	assert.Assert(t, len(cs.Releases) == 1)
	assert.Check(t, is.Contains(cs.Releases[0].Error, "values/dev.cue"))
}

// An @embed glob that matches CUE files reads them from the base commit.
func TestFastReviewEmbedsCUEFilesOfTheBase(t *testing.T) {
	dir := soundRepoWith(t, embedBody, embedFiles(), func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "deploy", "data", "stamp.cue"), []byte("// two\n"), 0o644))
	})
	fast := fastEqualsFull(t, dir)
	assert.Assert(t, fast.Counts.Changed(), "the edit of data/stamp.cue was not seen: %+v", fast.Releases)
	for _, r := range fast.Releases {
		assert.Check(t, is.Equal(r.Error, ""), "%s/%s", r.Name, r.Environment)
	}
}

// The base's fingerprint reads the embedded CUE file from the commit, as
// the head's reads it from the disk: with nothing changed both sides hash
// alike and the pair is skipped (a base hashed without its embedded files
// would also key the render cache to the wrong content).
func TestEmbeddedCUEFilesHashAlikeOnBothSides(t *testing.T) {
	dir := soundRepoWith(t, embedBody, embedFiles(), func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "deploy", "README.md"), []byte("unrelated\n"), 0o644))
	})
	fast := fastEqualsFull(t, dir)
	assert.Equal(t, len(fast.Unchanged), 1, "rendered although nothing changed: %+v", fast.Releases)
}

// A values file reached through a directory symlink the repository
// commits reads on the base as a checkout would: the edit behind the link
// is seen, and neither side fails.
func TestFastReviewFollowsCommittedSymlinks(t *testing.T) {
	dir := soundRepoWith(t, `
environments: dev: {namespace: "dev", valuesFiles: ["../shared-link/values.yaml"]}
releases: app: #module: appmodule
`, map[string]string{"../shared-link": ""}, func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "shared", "values.yaml"), []byte("stamp: two\n"), 0o644))
	})
	fast := fastEqualsFull(t, dir)
	assert.Assert(t, fast.Counts.Changed(), "the edit behind the link was not seen: %+v", fast.Releases)
	for _, r := range fast.Releases {
		assert.Check(t, is.Equal(r.Error, ""), "%s/%s", r.Name, r.Environment)
	}
}

// embedBody's environment takes its stamp from a CUE file an @embed glob
// reads as text (embedFiles).
const embedBody = `
environments: dev: {namespace: "dev", values: stamp: _data["data/stamp.cue"]}
releases: app: #module: appmodule
`

func embedFiles() map[string]string {
	return map[string]string{
		"embed.cue":      "@extern(embed)\n\npackage deploy\n\n_data: _ @embed(glob=\"data/*.cue\", type=text)\n",
		"data/stamp.cue": "// one\n",
	}
}
