package render_test

import (
	"fmt"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/internal/deploytest"
)

func kinds(t *testing.T, dir string) []string {
	t.Helper()
	rel := renderOne(t, dir, "test")
	var out []string
	for _, r := range rel.Resources {
		out = append(out, r.Object.GetKind()+"/"+r.Object.GetName())
	}
	slices.Sort(out)
	return out
}

// Upstream's matching on the project's own small v2 fixtures: a label a
// transformer requires is matched against the component's matchLabels,
// derived from its primitives, never against metadata.labels; an optional
// trait a transformer names is handled by it; a list output renders every
// object.
func TestV2MatchingSemantics(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	dir := deploytest.V2Deployment(t, "shop", `image: string | *"nginx:1.27"`, `
	web: cat.#Stateless & {spec: container: image: #config.image}
	// metadata.labels say stateless; the primitive says task: a Job.
	migrate: cat.#Task & {
		metadata: labels: "core.opmodel.dev/workload-type": "stateless"
		spec: container: image: #config.image
	}
	api: cat.#Stateless & {
		#traits: (cat.#ExposeFQN): cat.#Expose
		spec: {container: image: #config.image, expose: port: 8080}
	}
	settings: {
		c.#Component
		#resources: (cat.#ConfigsFQN): cat.#Configs
		spec: configs: {a: {k: "1"}, b: {k: "2"}}
	}`)
	assert.DeepEqual(t, kinds(t, dir), []string{
		"ConfigMap/app-settings-a", "ConfigMap/app-settings-b",
		"Deployment/app-api", "Deployment/app-web", "Job/app-migrate", "Service/app-api",
	})
}

// What no transformer handles is refused, naming component and FQN: a
// resource always; a trait unless the component marks it optional.
func TestV2UnhandledDemandsAreRefused(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	unknownResource := deploytest.V2Deployment(t, "shop", "", `
	odd: {
		c.#Component
		#resources: "example.test/resources/unknown@v1": {metadata: fqn: "example.test/resources/unknown@v1"}
	}`)
	err := renderErr(t, unknownResource, "test")
	assert.Check(t, is.Contains(err.Error(), `component "odd": no transformer of the platform handles resource example.test/resources/unknown@v1`))

	// A backup trait: no transformer handles it.
	trait := `
	job: cat.#Task & {
		#traits: (cat.#BackupFQN): cat.#Backup%s
		spec: container: image: "busybox"
	}`
	err = renderErr(t, deploytest.V2Deployment(t, "shop", "", fmt.Sprintf(trait, "")), "test")
	assert.Check(t, is.Contains(err.Error(), `component "job": no transformer of the platform handles trait example.test/traits/backup@v1 (mark it optional`))
	rel := renderOne(t, deploytest.V2Deployment(t, "shop", "", fmt.Sprintf(trait, " & {optional: true}")), "test")
	assert.Check(t, is.Contains(rel.Warnings, `component "job": no matched transformer handles optional trait example.test/traits/backup@v1`), "%v", rel.Warnings)
}

// A mistake in the module names the user's file and line.
func TestV2ErrorsNameTheModulesFile(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	dir := deploytest.V2Deployment(t, "shop", "", `
	web: cat.#Stateless & {spec: container: {image: "nginx", port: "eighty"}}`)
	err := renderErr(t, dir, "test")
	assert.Check(t, is.Contains(err.Error(), "app/app.cue:"), err.Error())
	assert.Check(t, is.Contains(err.Error(), `"eighty"`), err.Error())
}
