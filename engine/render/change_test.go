package render_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/render"
)

const plainRelease = `
environments: staging: {namespace: "staging", values: logLevel: "debug"}
releases: myapp: {#module: _app, values: image: "myapp:v2"}
`

// Inventory RFC scenario H: the same inputs give the same change ID; a new
// module version gives a new one even when the output is the same.
func TestScenarioH_IdempotentChangeID(t *testing.T) {
	dir := deployment(t, plainRelease)
	a, b := renderOne(t, dir, "staging"), renderOne(t, dir, "staging")
	assert.Equal(t, a.ChangeID, b.ChangeID)
	assert.Equal(t, a.ManifestDigest, b.ManifestDigest)
	assert.Equal(t, a.ValuesText, b.ValuesText)

	bumped := strings.Replace(appModule, `version:    "1.0.0"`, `version:    "1.1.0"`, 1)
	c := renderOne(t, deployment(t, plainRelease, "app/app.cue", bumped), "staging")
	assert.Check(t, c.ChangeID != a.ChangeID, "a module upgrade is a new change")
}

// Inventory RFC scenario I: a template change with the same values changes
// the manifest digest and so the change ID.
func TestScenarioI_TemplateChangeIsANewChange(t *testing.T) {
	a := renderOne(t, deployment(t, plainRelease), "staging")
	withPort := strings.Replace(appModule, `image: #config.image`, "image: #config.image\n\t\t\tports: metrics: containerPort: 9100", 1)
	b := renderOne(t, deployment(t, plainRelease, "app/app.cue", withPort), "staging")
	assert.Equal(t, a.ValuesText, b.ValuesText, "same values")
	assert.Check(t, a.ManifestDigest != b.ManifestDigest)
	assert.Check(t, a.ChangeID != b.ChangeID)
}

// A value that equals the default still changes nothing in the output, but
// it is resolved either way, so the change ID does not depend on whether a
// default was written out (values are the resolved values, not files).
func TestChangeIDUsesResolvedValuesNotFiles(t *testing.T) {
	dir := deployment(t, plainRelease)
	a := renderOne(t, dir, "staging")
	f := filepath.Join(t.TempDir(), "same.yaml")
	assert.NilError(t, os.WriteFile(f, []byte("replicaCount: 1\n"), 0o644))
	b := renderOne(t, dir, "staging", f)
	assert.Equal(t, a.ChangeID, b.ChangeID, "a values file path never enters the change ID")
	assert.Check(t, is.Contains(a.ValuesText, "replicaCount: 1"), "defaults are part of the resolved values")
}

func TestValuesFilesMergeLastInOrder(t *testing.T) {
	dir := deployment(t, `
environments: staging: {namespace: "staging", values: {replicaCount: 2, logLevel: "debug", db: host: "db.env"}}
releases: myapp: {#module: _app, values: {image: "myapp:v2", db: port: 1000}}
`)
	tmp := t.TempDir()
	first := filepath.Join(tmp, "first.yaml")
	second := filepath.Join(tmp, "second.cue")
	assert.NilError(t, os.WriteFile(first, []byte("replicaCount: 3\ndb:\n  host: db.file\n"), 0o644))
	assert.NilError(t, os.WriteFile(second, []byte("replicaCount: 4\n"), 0o644))
	r := renderOne(t, dir, "staging", first, second)
	v := values(t, r)
	assert.Check(t, is.Equal(v["replicaCount"], 4.0), "the last file wins")
	assert.Check(t, is.Equal(v["logLevel"], "debug"), "environment value kept")
	db := v["db"].(map[string]any)
	assert.Check(t, is.Equal(db["host"], "db.file"), "a file wins over the environment")
	assert.Check(t, is.Equal(db["port"], 1000.0), "release value kept in a merged struct")
}

func TestValuesFileErrorsNameTheFile(t *testing.T) {
	dir := deployment(t, plainRelease)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	assert.NilError(t, os.WriteFile(bad, []byte("replicaCount: many\nextra: 1\n"), 0o644))
	err := renderErr(t, dir, "staging", bad)
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), "bad.yaml"))
	assert.Check(t, is.Contains(err.Error(), "replicaCount"))
}

func TestValuesFilesNeedExactlyOneRelease(t *testing.T) {
	dir := deployment(t, plainRelease+`releases: other: {#module: _app, values: image: "o"}`)
	f := filepath.Join(t.TempDir(), "v.yaml")
	assert.NilError(t, os.WriteFile(f, []byte("replicaCount: 3\n"), 0o644))
	_, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "staging", ValuesFiles: []string{f}})
	assert.ErrorContains(t, err, "exactly one release")
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "staging", Releases: []string{"other"}, ValuesFiles: []string{f}})
	assert.NilError(t, err)
	assert.Equal(t, values(t, rels[0])["replicaCount"], 3.0)
}

func TestSelectionErrorsListWhatExists(t *testing.T) {
	dir := deployment(t, plainRelease)
	_, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod"})
	assert.ErrorContains(t, err, `environment "prod" is not declared`)
	assert.ErrorContains(t, err, "environments: staging")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	_, err = render.Render(t.Context(), render.Options{Dir: dir, Releases: []string{"nope"}})
	assert.ErrorContains(t, err, "releases: myapp")
	_, err = render.Render(t.Context(), render.Options{Dir: filepath.Join(dir, "missing")})
	assert.ErrorContains(t, err, "does not exist")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
}

func TestSyntaxErrorHasPosition(t *testing.T) {
	dir := deployment(t, "releases: myapp: {#module: _app\n")
	err := renderErr(t, dir, "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), filepath.Join(dir, "deploy.cue")+":"))
}

func TestTypeConflictHasPosition(t *testing.T) {
	dir := deployment(t, `releases: myapp: {#module: _app, metadata: namespace: "x", values: {image: "a", replicaCount: "b"}}`)
	err := renderErr(t, dir, "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), "replicaCount"))
	bodyLine := strings.Count(rootHeader, "\n") + 1
	assert.Check(t, is.Contains(err.Error(), fmt.Sprintf("%s:%d:95", filepath.Join(dir, "deploy.cue"), bodyLine)), "points at the bad value")
}

func TestIdentityOnlyStopsBeforeTransformers(t *testing.T) {
	dir := deployment(t, plainRelease)
	full := renderOne(t, dir, "staging")
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "staging", IdentityOnly: true})
	assert.NilError(t, err)
	id := rels[0]
	assert.Equal(t, id.ReleaseID, full.ReleaseID)
	assert.Equal(t, id.Namespace, full.Namespace)
	assert.Equal(t, id.Module, full.Module)
	assert.Equal(t, len(id.Resources), 0)
	assert.Equal(t, id.ManifestDigest, "")
}
