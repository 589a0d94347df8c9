package render_test

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// opmDeployment publishes the OPM-model modules to an in-memory registry
// and writes a deployment directory releasing the OPM-style app with them.
func opmDeployment(t *testing.T, deploy string) string {
	t.Helper()
	deploytest.Registry(t, deploytest.OPMModules()...)
	return writeDir(t, map[string]string{"cue.mod/module.cue": deploytest.OPMModuleFile, "deploy.cue": deploy})
}

func byKind(r *render.Release) map[string][]string {
	out := map[string][]string{}
	for _, res := range r.Resources {
		out[res.Object.GetKind()] = append(out[res.Object.GetKind()], res.Object.GetName())
	}
	return out
}

// A module written for an OPM catalog, fetched from a registry, renders
// with the registry's provider: transformers matched by label, resource
// and trait FQNs; one object, a map of objects and a list of objects.
func TestOPMModuleRendersWithRegistryProvider(t *testing.T) {
	dir := opmDeployment(t, deploytest.OPMDeployment)
	r := renderOne(t, dir, "staging")

	assert.DeepEqual(t, byKind(r), map[string][]string{
		"Deployment": {"web"},
		"Service":    {"web"},
		"ConfigMap":  {"web-greeting", "web-static"},
	})
	assert.Equal(t, r.Namespace, "staging")
	assert.Equal(t, r.Module.Path, "example.com/hello@v0")
	assert.Equal(t, r.Module.FQN, "example.com/hello@v0#hello")
	// The seeds' identity: fqn:name:namespace:env.
	assert.Equal(t, r.ReleaseID, uuid5("example.com/hello@v0#hello:hello:staging:staging"))
	// Author values < release values < environment values.
	assert.DeepEqual(t, values(t, r), map[string]any{"image": "ghcr.io/example/hello:1.0.0", "replicas": float64(2), "greeting": "hi"})
	for _, res := range r.Resources {
		l := res.Object.GetLabels()
		where := res.Object.GetKind() + "/" + res.Object.GetName()
		// The registry core's #TransformerContext made these labels.
		assert.Check(t, is.Equal(l[deploytest.OPMContextMarker], deploytest.OPMCoreVersion), where)
		assert.Check(t, is.Equal(l["environment.opmodel.dev/name"], "staging"), where)
		assert.Check(t, is.Equal(l["opmodel.dev/tier"], "non-production"), where)
		assert.Check(t, is.Equal(l["module-release.opmodel.dev/uuid"], r.ReleaseID), where)
		assert.Check(t, is.Equal(l["module-release.opmodel.dev/environment"], "staging"), where)
		assert.Check(t, is.Equal(l["module.opmodel.dev/uuid"], r.Module.ID), where)
		assert.Check(t, is.Equal(l["component.opmodel.dev/name"], "web"), where)
		assert.Check(t, is.Equal(res.Object.GetNamespace(), "staging"), where)
		_, leaked := l["transformer.opmodel.dev/list-output"]
		assert.Check(t, !leaked, where)
	}
	for _, res := range r.Resources {
		if res.Object.GetKind() == "Deployment" {
			replicas, _, _ := unstructuredInt(res.Object.Object, "spec", "replicas")
			assert.Equal(t, replicas, int64(2))
		}
	}
}

// Without an environment the module's defaultNamespace is the namespace
// and its author values apply under the release's.
func TestOPMModuleDefaultNamespaceAndAuthorValues(t *testing.T) {
	dir := opmDeployment(t, deploytest.OPMDeployment)
	r := renderOne(t, dir, "")
	assert.Equal(t, r.Namespace, "hello")
	assert.Equal(t, r.ReleaseID, uuid5("example.com/hello@v0#hello:hello:hello"))
	assert.DeepEqual(t, values(t, r), map[string]any{"image": "ghcr.io/example/hello:1.0.0", "replicas": float64(1), "greeting": "hi"})
}

// The author's spec is closed: a field no resource or trait declares is an
// error with its position.
func TestOPMComponentSpecIsClosed(t *testing.T) {
	deploytest.Registry(t, deploytest.OPMModules()...)
	dir := writeDir(t, map[string]string{
		"cue.mod/module.cue": deploytest.OPMModuleFile,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/opm-deploy/app"
	k8s "opmodel.dev/providers/kubernetes@v0"
)

providers: kubernetes: k8s.#Provider
releases: app: core.#ModuleRelease & {#module: appmodule, metadata: {name: "app", namespace: "apps"}}
`,
		"app/app.cue": `package app

import (
	core "opmodel.dev/core@v0"
	workload "opmodel.dev/resources/workload@v0"
)

core.#Module
metadata: {apiVersion: "test.example/opm-deploy/app@v0", name: "app", version: "0.1.0"}
#config: {}
values: {}
#components: web: {
	workload.#Container
	metadata: labels: "core.opmodel.dev/workload-type": "stateless"
	spec: {
		container: {name: "web", image: "nginx"}
		replicaz: 3
	}
}
`,
	})
	err := renderErr(t, dir, "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, "replicaz")
	assert.ErrorContains(t, err, "app.cue:17")
}

// A component no transformer of the providers matches is an error that
// says what the component has; OPM's modules do not match the embedded
// provider's transformers.
func TestOPMModuleWithoutItsProvider(t *testing.T) {
	dir := opmDeployment(t, strings.Replace(deploytest.OPMDeployment, "providers: kubernetes: k8s.#Provider", "_k8s: k8s", 1))
	err := renderErr(t, dir, "staging")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, `component "web"`)
	assert.ErrorContains(t, err, "matches no transformer")
	assert.ErrorContains(t, err, "opmodel.dev/resources/workload@v0#Container")
}

// A trait none of the matched transformers requires or accepts is an
// error: the author asked for something nothing would render.
func TestOPMUnhandledTraitIsAnError(t *testing.T) {
	dir := opmDeployment(t, strings.Replace(deploytest.OPMDeployment, "providers: kubernetes: k8s.#Provider", `providers: partial: transformers: {
	(k8s.#ConfigMapTransformer.metadata.fqn): k8s.#ConfigMapTransformer
	(k8s.#ServiceTransformer.metadata.fqn):   k8s.#ServiceTransformer
}`, 1))
	err := renderErr(t, dir, "staging")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, "opmodel.dev/traits/workload@v0#Scaling")
}

// With the registry gone and an empty cache, render fails naming the
// module@version it could not fetch; nothing embedded stands in.
func TestOPMModuleRegistryStopped(t *testing.T) {
	reg := deploytest.Registry(t, deploytest.OPMModules()...)
	reg.Close()
	dir := writeDir(t, map[string]string{"cue.mod/module.cue": deploytest.OPMModuleFile, "deploy.cue": deploytest.OPMDeployment})
	err := renderErr(t, dir, "staging")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Regexp(`(example.com/hello|opmodel.dev/(core|providers|resources))@v0\.[0-9]+\.[0-9]+`, err.Error()))
	assert.ErrorContains(t, err, "CUE_REGISTRY="+reg.Host())
}

// teamProvider is a team's own provider in the deployment directory: it
// renders a ServiceMonitor (a CRD's object) for every stateless container
// component, beside whatever the Kubernetes provider renders.
const teamProvider = `package team

import (
	core "opmodel.dev/core@v0"
	workload "opmodel.dev/resources/workload@v0"
)

#Provider: core.#Provider & {
	metadata: name: "team"
	transformers: (#MonitorTransformer.metadata.fqn): #MonitorTransformer
}

#MonitorTransformer: core.#Transformer & {
	metadata: {apiVersion: "test.example/team@v0", name: "monitor", fqn: "test.example/team@v0#MonitorTransformer"}
	requiredLabels: "core.opmodel.dev/workload-type": "stateless"
	requiredResources: (workload.#ContainerResource.metadata.fqn): workload.#ContainerResource
	optionalTraits: (workload.#ScalingTrait.metadata.fqn): workload.#ScalingTrait
	#transform: {
		#component: _
		#context:   core.#TransformerContext
		output: {
			apiVersion: "monitoring.coreos.com/v1"
			kind:       "ServiceMonitor"
			metadata: {name: #component.metadata.name, namespace: #context.namespace, labels: #context.labels}
			spec: selector: matchLabels: #context.selector
		}
	}
}
`

// teamProviderDeployment is the OPM deployment whose environment
// production names the registry's Kubernetes provider and a team's own;
// staging names none, so uses the deployment directory's.
func teamProviderDeployment(t *testing.T) string {
	t.Helper()
	deploy := strings.Replace(deploytest.OPMDeployment, `k8s "opmodel.dev/providers/kubernetes@v0"`, "k8s \"opmodel.dev/providers/kubernetes@v0\"\n\tteamprovider \"test.example/opm-deploy/team\"", 1) + `
environments: production: {
	namespace: "production"
	providers: {kubernetes: k8s.#Provider, team: teamprovider.#Provider}
}
`
	deploytest.Registry(t, deploytest.OPMModules()...)
	dir := writeDir(t, map[string]string{"cue.mod/module.cue": deploytest.OPMModuleFile, "deploy.cue": deploy, "team/team.cue": teamProvider})
	return dir
}

// Providers combine: an environment names the registry's Kubernetes
// provider and a team's own; environments that name none use the
// deployment directory's.
func TestProvidersCombinePerEnvironment(t *testing.T) {
	dir := teamProviderDeployment(t)

	prod := renderOne(t, dir, "production")
	assert.DeepEqual(t, byKind(prod), map[string][]string{
		"Deployment":     {"web"},
		"Service":        {"web"},
		"ConfigMap":      {"web-greeting", "web-static"},
		"ServiceMonitor": {"web"},
	})
	for _, res := range prod.Resources {
		assert.Check(t, is.Equal(res.Object.GetLabels()["environment.opmodel.dev/name"], "production"))
	}
	stg := renderOne(t, dir, "staging")
	assert.Check(t, is.Len(byKind(stg)["ServiceMonitor"], 0))
	assert.Check(t, is.Len(byKind(stg)["Deployment"], 1))
}

// A Session reads each environment's transformers once and reuses them
// for every later render there (a review renders a side's releases one
// call at a time): renders alternating between an environment with its
// own providers and one using the deployment's are those of a fresh
// render each, byte for byte.
func TestSessionKeepsEachEnvironmentsProviders(t *testing.T) {
	dir := teamProviderDeployment(t)
	d, err := load.Load(t.Context(), dir)
	assert.NilError(t, err)
	s := render.NewSession(d)
	for _, env := range []string{"production", "staging", "production", "staging"} {
		rels, err := s.Render(t.Context(), render.Options{Dir: dir, Environment: env})
		assert.NilError(t, err)
		assert.Equal(t, len(rels), 1)
		want := renderOne(t, dir, env)
		assert.Equal(t, rels[0].ManifestDigest, want.ManifestDigest, "%s", env)
		assert.DeepEqual(t, byKind(rels[0]), byKind(want))
		assert.Equal(t, len(byKind(rels[0])["ServiceMonitor"]) == 1, env == "production", "%s", env)
	}
}

// Two providers defining the same transformer FQN is an error: which one
// renders would be a guess.
func TestProvidersWithTheSameTransformerConflict(t *testing.T) {
	dir := opmDeployment(t, strings.Replace(deploytest.OPMDeployment, "providers: kubernetes: k8s.#Provider", "providers: {a: k8s.#Provider, b: k8s.#Provider}", 1))
	err := renderErr(t, dir, "staging")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, `defined by providers "a" and "b"`)
}

// With no providers declared and no registry reachable, the embedded
// catalog's Kubernetes provider renders the catalog's own modules.
func TestEmbeddedProviderIsTheOfflineDefault(t *testing.T) {
	t.Setenv("CUE_REGISTRY", "127.0.0.1:1")
	t.Setenv("CUE_CACHE_DIR", t.TempDir())
	dir := deployment(t, `
releases: myapp: {#module: _app, metadata: namespace: "apps", values: image: "myapp:v1"}
`)
	r := renderOne(t, dir, "")
	assert.DeepEqual(t, byKind(r), map[string][]string{"Deployment": {"web"}, "Service": {"web"}})
}

// A deployment directory releases a module written for an OPM catalog into
// staging and production as it does its own: environment values over the
// author's, one identity per environment, environment values type-checked
// against the module's #config.
func TestOPMModuleInTwoEnvironments(t *testing.T) {
	deploy := deploytest.OPMDeployment + `
environments: production: {
	namespace: "production"
	cluster: kubeContext: "prod"
	values: {replicas: 5, image: "ghcr.io/example/hello:2.0.0"}
}
`
	dir := opmDeployment(t, deploy)
	stg, prod := renderOne(t, dir, "staging"), renderOne(t, dir, "production")
	assert.Equal(t, prod.Namespace, "production")
	assert.Equal(t, prod.Cluster.KubeContext, "prod")
	assert.Check(t, stg.ReleaseID != prod.ReleaseID)
	assert.Equal(t, prod.ReleaseID, uuid5("example.com/hello@v0#hello:hello:production:production"))
	assert.DeepEqual(t, values(t, prod), map[string]any{"image": "ghcr.io/example/hello:2.0.0", "replicas": float64(5), "greeting": "hi"})
	assert.Check(t, stg.ChangeID != prod.ChangeID)

	bad := opmDeployment(t, deploytest.OPMDeployment+"\nenvironments: broken: {namespace: \"broken\", values: replicas: \"many\"}\n")
	err := renderErr(t, bad, "broken")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.ErrorContains(t, err, "environments.broken.values.replicas")
}

// A blueprint contributes one spec field and fills the spec of the
// resources it is composed of; the embedded provider renders those.
func TestEmbeddedBlueprint(t *testing.T) {
	dir := deployment(t, `
releases: myapp: {
	#module: _app & {#components: site: {
		core.#WebService
		spec: webService: {image: "nginx:1.27", replicas: 2}
	}}
	metadata: namespace: "apps"
	values: image: "myapp:v1"
}
`)
	r := renderOne(t, dir, "")
	assert.DeepEqual(t, byKind(r), map[string][]string{"Deployment": {"site", "web"}, "Service": {"site", "web"}})
	for _, res := range r.Resources {
		if res.Component == "site" && res.Object.GetKind() == "Deployment" {
			replicas, _, _ := unstructuredInt(res.Object.Object, "spec", "replicas")
			assert.Equal(t, replicas, int64(2))
		}
	}
}
