package render_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
)

// opmNamespace is the OPM UUIDv5 namespace, written here independently of
// the catalog so the test catches a change on either side.
var opmNamespace = uuid.MustParse("c1cbe76d-5687-5a47-bfe6-83b081b15413")

func uuid5(s string) string { return uuid.NewSHA1(opmNamespace, []byte(s)).String() }

func TestIdentityMatchesUUIDv5(t *testing.T) {
	dir := deployment(t, `
environments: staging: namespace: "stg"
releases: myapp: {
	#module: _app
	metadata: namespace: "team-a"
	values: image: "myapp:v2"
}
`)
	const fqn = "test.example/deploy/app@v0#app"

	plain := renderOne(t, dir, "")
	assert.Equal(t, plain.Module.FQN, fqn)
	assert.Equal(t, plain.Module.ID, uuid5(fqn+":1.0.0"))
	assert.Equal(t, plain.ReleaseID, uuid5(fqn+":myapp:team-a"))

	// The release sets its namespace, so it wins over the environment's;
	// the environment name joins the identity input.
	staged := renderOne(t, dir, "staging")
	assert.Equal(t, staged.Namespace, "team-a")
	assert.Equal(t, staged.ReleaseID, uuid5(fqn+":myapp:team-a:staging"))
	assert.Equal(t, staged.Module.ID, plain.Module.ID, "the module identity does not depend on the release")

	for _, r := range staged.Resources {
		labels := r.Object.GetLabels()
		assert.Equal(t, labels["module-release.opmodel.dev/uuid"], staged.ReleaseID)
		assert.Equal(t, labels["module.opmodel.dev/uuid"], staged.Module.ID)
	}
}

func TestIdentityCannotBeSetByHand(t *testing.T) {
	for name, body := range map[string]string{
		"release": `releases: myapp: {
	#module: _app
	metadata: {namespace: "default", identity: "00000000-0000-5000-8000-000000000000"}
	values: image: "x"
}`,
		"module": `releases: myapp: {
	#module: _app & {metadata: identity: "00000000-0000-5000-8000-000000000000"}
	metadata: namespace: "default"
	values: image: "x"
}`,
	} {
		t.Run(name, func(t *testing.T) {
			err := renderErr(t, deployment(t, body), "")
			assert.Equal(t, fault.KindOf(err), fault.Validation)
			assert.Check(t, is.Contains(err.Error(), "identity"))
			assert.Check(t, is.Contains(err.Error(), "conflicting values"))
			assert.Check(t, is.Contains(err.Error(), "deploy.cue:"), "the error carries the CUE position")
		})
	}
}

func TestEveryResourceCarriesTheSeedLabels(t *testing.T) {
	dir := deployment(t, `
environments: prod: {
	namespace: "prod"
	metadata: {labels: team: "payments", annotations: "opmodel.dev/owner": "ops"}
}
releases: myapp: {#module: _app, values: image: "myapp:v2"}
`)
	r := renderOne(t, dir, "prod")
	assert.Equal(t, len(r.Resources), 2)
	want := map[string]string{
		"app.kubernetes.io/managed-by":           "open-platform-model",
		"app.kubernetes.io/name":                 "web",
		"app.kubernetes.io/instance":             "web",
		"app.kubernetes.io/version":              "1.0.0",
		"module-release.opmodel.dev/name":        "myapp",
		"module-release.opmodel.dev/version":     "1.0.0",
		"module-release.opmodel.dev/uuid":        r.ReleaseID,
		"module-release.opmodel.dev/environment": "prod",
		"module.opmodel.dev/name":                "app",
		"module.opmodel.dev/version":             "1.0.0",
		"module.opmodel.dev/uuid":                r.Module.ID,
		"component.opmodel.dev/name":             "web",
		"environment.opmodel.dev/name":           "prod",
		"team":                                   "payments",
	}
	for _, res := range r.Resources {
		assert.Equal(t, res.Component, "web")
		labels := res.Object.GetLabels()
		for k, v := range want {
			assert.Check(t, is.Equal(labels[k], v), "%s %s label %s", res.Object.GetKind(), res.Object.GetName(), k)
		}
		assert.Check(t, is.Equal(res.Object.GetAnnotations()["opmodel.dev/owner"], "ops"))
		assert.Check(t, is.Equal(res.Object.GetNamespace(), "prod"))
	}
}

func TestComponentWithoutTransformerIsAnError(t *testing.T) {
	dir := deployment(t, `
releases: myapp: {
	#module: _app & {#components: idle: metadata: labels: x: "y"}
	metadata: namespace: "default"
	values: image: "x"
}
`)
	err := renderErr(t, dir, "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), `component "idle" matches no transformer`))
	assert.Check(t, strings.Contains(err.Error(), "deploy.cue:") || strings.Contains(err.Error(), ".cue:"), err.Error())
}
