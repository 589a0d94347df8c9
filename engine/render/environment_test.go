package render_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// Scenarios A–H of the environment RFC (seed 002).

func values(t *testing.T, r *render.Release) map[string]any {
	t.Helper()
	var v map[string]any
	assert.NilError(t, json.Unmarshal(r.Values, &v))
	return v
}

func TestScenarioA_EnvironmentWithClusterAndNamespace(t *testing.T) {
	dir := deployment(t, `
environments: staging: {
	cluster: kubeContext: "eks-us-west-2-staging"
	namespace: "staging"
}
releases: myapp: {#module: _app, values: {image: "myapp:v2", replicaCount: 1}}
`)
	r := renderOne(t, dir, "staging")
	assert.Equal(t, r.Namespace, "staging")
	assert.Equal(t, r.Environment, "staging")
	assert.Equal(t, r.ReleaseID, uuid5("test.example/deploy/app@v0#app:myapp:staging:staging"))
	assert.Equal(t, r.Cluster.KubeContext, "eks-us-west-2-staging")
	for _, res := range r.Resources {
		assert.Equal(t, res.Object.GetLabels()["environment.opmodel.dev/name"], "staging")
	}
}

func TestScenarioB_SameClusterDifferentEnvironments(t *testing.T) {
	dir := deployment(t, `
environments: staging: {
	cluster: kubeContext: "eks-us-west-2"
	namespace: "staging"
	values: {replicaCount: 1, logLevel: "debug"}
}
environments: production: {
	cluster: kubeContext: "eks-us-west-2"
	namespace: "production"
	values: {replicaCount: 3, logLevel: "info"}
}
releases: myapp: {#module: _app, values: image: "myapp:v2"}
`)
	stg, prod := renderOne(t, dir, "staging"), renderOne(t, dir, "production")
	assert.Equal(t, stg.Cluster.KubeContext, prod.Cluster.KubeContext)
	assert.Check(t, stg.ReleaseID != prod.ReleaseID)
	assert.Equal(t, stg.ReleaseID, uuid5("test.example/deploy/app@v0#app:myapp:staging:staging"))
	assert.Equal(t, prod.ReleaseID, uuid5("test.example/deploy/app@v0#app:myapp:production:production"))
	sv, pv := values(t, stg), values(t, prod)
	assert.Check(t, is.Equal(sv["image"], "myapp:v2"))
	assert.Check(t, is.Equal(sv["replicaCount"], 1.0))
	assert.Check(t, is.Equal(sv["logLevel"], "debug"))
	assert.Check(t, is.Equal(pv["image"], "myapp:v2"))
	assert.Check(t, is.Equal(pv["replicaCount"], 3.0))
	assert.Check(t, is.Equal(pv["logLevel"], "info"))
	assert.Check(t, stg.ManifestDigest != prod.ManifestDigest)
}

func TestScenarioC_NoEnvironmentIsBackwardCompatible(t *testing.T) {
	dir := deployment(t, `
environments: staging: {namespace: "staging", values: replicaCount: 9}
releases: myapp: {
	#module: _app
	metadata: namespace: "default"
	values: {image: "myapp:v2", replicaCount: 1}
}
`)
	r := renderOne(t, dir, "")
	assert.Equal(t, r.Environment, "")
	assert.Equal(t, r.Namespace, "default")
	assert.Equal(t, r.ReleaseID, uuid5("test.example/deploy/app@v0#app:myapp:default"))
	assert.Equal(t, values(t, r)["replicaCount"], 1.0)
	for _, res := range r.Resources {
		labels := res.Object.GetLabels()
		_, hasEnv := labels["environment.opmodel.dev/name"]
		_, hasRelEnv := labels["module-release.opmodel.dev/environment"]
		assert.Check(t, !hasEnv && !hasRelEnv, "no environment labels without an environment: %v", labels)
	}
}

func TestScenarioD_EnvironmentWins(t *testing.T) {
	dir := deployment(t, `
environments: ops: {namespace: "ops", values: {replicaCount: 5, db: host: "db.ops"}}
releases: myapp: {#module: _app, values: {image: "myapp:v2", replicaCount: 2, logLevel: "debug", db: port: 6000}}
`)
	r := renderOne(t, dir, "ops")
	v := values(t, r)
	assert.Check(t, is.Equal(v["image"], "myapp:v2"), "release value kept")
	assert.Check(t, is.Equal(v["replicaCount"], 5.0), "environment wins")
	assert.Check(t, is.Equal(v["logLevel"], "debug"), "release value kept")
	db := v["db"].(map[string]any)
	assert.Check(t, is.Equal(db["host"], "db.ops"), "structs merge: environment field")
	assert.Check(t, is.Equal(db["port"], 6000.0), "structs merge: release field")
	assert.Check(t, is.Contains(r.ValuesText, "replicaCount: 5"))
	dep := r.Resources[1].Object
	assert.Equal(t, dep.GetKind(), "Deployment")
	replicas, _, _ := unstructuredInt(dep.Object, "spec", "replicas")
	assert.Equal(t, replicas, int64(5))
}

func TestScenarioE_EnvironmentValueTypeMismatch(t *testing.T) {
	dir := deployment(t, `
environments: bad: {namespace: "bad", values: replicaCount: "three"}
releases: myapp: {#module: _app, values: image: "myapp:v2"}
`)
	err := renderErr(t, dir, "bad")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	msg := err.Error()
	assert.Check(t, is.Contains(msg, `environment "bad"`))
	assert.Check(t, is.Contains(msg, "replicaCount"))
	// The field, the given type and the wanted one, in the user's words:
	// no "empty disjunction", no "conflicting values".
	assert.Check(t, is.Contains(msg, `environments.bad.values.replicaCount: "three" is a string, but this field takes int`))
	assert.Check(t, !strings.Contains(msg, "disjunction") && !strings.Contains(msg, "conflicting values"), msg)
	assert.Check(t, is.Contains(msg, "deploy.cue:"), "points at the environment's value")
}

func TestEnvironmentUnknownFieldNamesFieldAndEnvironment(t *testing.T) {
	dir := deployment(t, `
environments: staging: {namespace: "staging", values: {replicaCount: 2, bogusField: true}}
releases: myapp: {#module: _app, values: image: "myapp:v2"}
`)
	err := renderErr(t, dir, "staging")
	msg := err.Error()
	assert.Check(t, is.Contains(msg, "bogusField"))
	assert.Check(t, is.Contains(msg, "not allowed"))
	assert.Check(t, is.Contains(msg, `environment "staging"`))
	assert.Equal(t, fault.KindOf(err), fault.Validation)
}

func TestMissingRequiredValueNamesField(t *testing.T) {
	dir := deployment(t, `
environments: staging: namespace: "staging"
releases: myapp: {#module: _app, values: replicaCount: 2}
`)
	err := renderErr(t, dir, "staging")
	assert.Check(t, is.Contains(err.Error(), "image"))
	assert.Check(t, is.Contains(err.Error(), `environment "staging"`))
	assert.Check(t, is.Contains(err.Error(), "required"))
}

func TestEnvironmentSuppliesRequiredValue(t *testing.T) {
	dir := deployment(t, `
environments: staging: {namespace: "staging", values: image: "from-env:1"}
releases: myapp: {#module: _app, values: replicaCount: 2}
`)
	r := renderOne(t, dir, "staging")
	assert.Equal(t, values(t, r)["image"], "from-env:1")
}

func TestScenarioF_ModulesShareAnEnvironment(t *testing.T) {
	dir := deployment(t, `
environments: staging: {cluster: kubeContext: "eks-staging", namespace: "staging", values: replicaCount: 1}
releases: frontend: {#module: _app, values: image: "frontend:v3"}
releases: backend: {#module: _app, values: {image: "backend:v2", replicaCount: 4}}
`)
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "staging"})
	assert.NilError(t, err)
	assert.Equal(t, len(rels), 2)
	back, front := rels[0], rels[1]
	assert.Equal(t, back.Name, "backend")
	assert.Check(t, back.ReleaseID != front.ReleaseID)
	for _, r := range rels {
		assert.Check(t, is.Equal(r.Namespace, "staging"))
		assert.Check(t, is.Equal(r.Cluster.KubeContext, "eks-staging"))
		assert.Check(t, is.Equal(values(t, r)["replicaCount"], 1.0), "%s: environment wins over the release", r.Name)
		for _, res := range r.Resources {
			assert.Check(t, is.Equal(res.Object.GetLabels()["environment.opmodel.dev/name"], "staging"))
		}
	}
}

func TestScenarioG_EnvironmentWithoutNamespace(t *testing.T) {
	dir := deployment(t, `
environments: production: {cluster: kubeContext: "eks-prod", values: replicaCount: 3}
releases: myapp: {#module: _app, metadata: namespace: "myapp-prod", values: image: "myapp:v2"}
`)
	r := renderOne(t, dir, "production")
	assert.Equal(t, r.Namespace, "myapp-prod")
	assert.Equal(t, r.Cluster.KubeContext, "eks-prod")
	assert.Equal(t, values(t, r)["replicaCount"], 3.0)
}

func TestScenarioH_EnvironmentNamespaceFillsRelease(t *testing.T) {
	dir := deployment(t, `
environments: staging: namespace: "staging-ns"
releases: myapp: {#module: _app, values: image: "myapp:v2"}
`)
	r := renderOne(t, dir, "staging")
	assert.Equal(t, r.Namespace, "staging-ns")
	assert.Equal(t, r.ReleaseID, uuid5("test.example/deploy/app@v0#app:myapp:staging-ns:staging"))
	assert.DeepEqual(t, r.Cluster, render.Cluster{}) // an environment without cluster uses the current context
}

func TestNoNamespaceAnywhereIsAClearError(t *testing.T) {
	dir := deployment(t, `releases: myapp: {#module: _app, values: image: "myapp:v2"}`)
	err := renderErr(t, dir, "")
	assert.Check(t, is.Contains(err.Error(), "has no namespace"))
	assert.Check(t, is.Contains(err.Error(), "--env"))
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	i, ok := cur.(int64)
	return i, ok, nil
}

// A required value nobody set names the field, and where a value goes:
// the error's position is the module's declaration, which is not where a
// user fixes it.
func TestMissingRequiredValueSaysWhereToSetIt(t *testing.T) {
	dir := deployment(t, `
environments: dev: {namespace: "dev"}
releases: myapp: {#module: _app}
`)
	err := renderErr(t, dir, "dev")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	msg := err.Error()
	assert.Check(t, is.Contains(msg, "values.image: field is required but not present"))
	assert.Check(t, is.Contains(msg, "next: set each required value in the release (releases.myapp: values: …), for this environment alone in environments.dev: values: …, or in a values file"), msg)
}

// An environment's valuesFiles for one release are read only when that
// release renders: `render -r web` needs no key to api's SOPS file.
func TestOnlyTheSelectedReleasesValuesFilesAreRead(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", "")
	assert.NilError(t, os.Unsetenv("SOPS_AGE_KEY"))
	enc, err := os.ReadFile(deploytest.SopsValues(t, "secret: api-secret\n"))
	assert.NilError(t, err)
	dir := deploytest.Write(t, map[string]string{
		"app/app.cue":   deploytest.HealthyModule,
		"web.yaml":      "stamp: web\n",
		"api.sops.yaml": string(enc),
		"deploy.cue": deploytest.Header + `
environments: prod: {namespace: "shop", valuesFiles: {web: ["web.yaml"], api: ["api.sops.yaml"]}}
releases: web: #module: appmodule
releases: api: #module: appmodule
`,
	})
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod", Releases: []string{"web"}})
	assert.NilError(t, err)
	assert.Equal(t, rels[0].Name, "web")
	_, err = render.Render(t.Context(), render.Options{Dir: dir, Environment: "prod", Releases: []string{"api"}})
	assert.ErrorContains(t, err, "api.sops.yaml")
	assert.ErrorContains(t, err, "no key here opens it")
}
