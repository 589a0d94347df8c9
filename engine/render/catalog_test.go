package render_test

import (
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
)

// teamModule is a module whose "web" component carries the catalog's
// resources plus fields of the team provider's TLS resource (defined in
// the deployment directory's certs package), and components set by the
// test through the fragment it appends.
const teamModule = `package app

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	"test.example/deploy/certs"
)

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {}

#components: web: {
	core.#Workload
	certs.#TLS
	spec: {
		workload: {type: "stateless", container: image: "registry.invalid/web:1"}
		tls: {issuer: "letsencrypt", dnsNames: ["shop.example.com"]}
	}
}
`

// certsProvider is a team provider: a TLS resource and a transformer
// rendering a cert-manager Certificate from it, written against the
// catalog's #Resource and #Transformer.
const certsProvider = `package certs

import core "github.com/opmodel/pipeline/catalog@v0"

#TLSResource: core.#Resource & {
	metadata: {apiVersion: "test.example/deploy/certs@v0", name: "tls"}
	#spec: tls: {issuer!: string, dnsNames!: [...string]}
}

#TLS: {#resources: (#TLSResource.metadata.fqn): #TLSResource}

#CertificateTransformer: core.#Transformer & {
	metadata: {apiVersion: "test.example/deploy/certs@v0", name: "certificate-transformer"}
	requiredResources: (#TLSResource.metadata.fqn): #TLSResource
	#transform: {
		#component: _
		#context:   core.#TransformerContext
		output: {
			apiVersion: "cert-manager.io/v1"
			kind:       "Certificate"
			metadata: #context.objectMeta & {name: #component.metadata.name}
			spec: {
				secretName: "\(#component.metadata.name)-tls"
				issuerRef: {kind: "ClusterIssuer", name: #component.spec.tls.issuer}
				dnsNames: #component.spec.tls.dnsNames
			}
		}
	}
}

provider: core.#Provider & {
	metadata: name: "certs"
	transformers: (#CertificateTransformer.metadata.fqn): #CertificateTransformer
}
`

const teamRoot = `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
	teamcerts "test.example/deploy/certs"
)

releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: app: {#module: appmodule, metadata: namespace: "shop"}

providers: {
	kubernetes: core.#KubernetesProvider
	certs:      teamcerts.provider
}
`

func teamDir(t *testing.T, provider, root string) string {
	t.Helper()
	return writeDir(t, map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"app/app.cue":        teamModule,
		"certs/certs.cue":    provider,
		"deploy.cue":         root,
	})
}

func TestTeamProviderRendersItsOwnResource(t *testing.T) {
	r := renderOne(t, teamDir(t, certsProvider, teamRoot), "")
	var kinds []string
	for _, res := range r.Resources {
		kinds = append(kinds, res.Object.GetKind())
		if res.Object.GetKind() == "Certificate" {
			assert.Equal(t, res.Object.GetNamespace(), "shop")
			assert.Equal(t, res.Object.GetLabels()["component.opmodel.dev/name"], "web")
		}
	}
	assert.DeepEqual(t, kinds, []string{"Deployment", "Certificate"})
}

// A transformer that declares `#context: _` takes the catalog's context as
// the engine evaluated it once for the component; one that declares
// core.#TransformerContext evaluates it itself. Both render the same object,
// environment labels and annotations included, and so do the catalog's own
// transformers either way.
func TestASharedContextRendersAsADeclaredOne(t *testing.T) {
	root := teamRoot + `
environments: prod: {
	metadata: {name: "prod", labels: team: "shop", annotations: "example.com/owner": "shop-team"}
	namespace: "shop"
}
releases: app: #environment: environments.prod
`
	shared := strings.Replace(certsProvider, "#context:   core.#TransformerContext", "#context:   _", 1)
	assert.Assert(t, shared != certsProvider)
	declared := renderOne(t, teamDir(t, certsProvider, root), "prod")
	taken := renderOne(t, teamDir(t, shared, root), "prod")
	assert.Equal(t, len(declared.Resources), 2)
	for i, res := range declared.Resources {
		assert.DeepEqual(t, taken.Resources[i].Object.Object, res.Object.Object)
		assert.Check(t, is.Equal(res.Object.GetLabels()["team"], "shop"), res.ID())
		assert.Check(t, is.Equal(res.Object.GetAnnotations()["example.com/owner"], "shop-team"), res.ID())
	}
}

func TestTwoTransformersClaimingOneOutputIsAnError(t *testing.T) {
	// A second transformer, in a second provider, rendering the same
	// Certificate for the same component.
	dup := certsProvider + `
#Copy: core.#Transformer & {
	metadata: {apiVersion: "test.example/deploy/certs@v0", name: "certificate-copy-transformer"}
	requiredResources: #CertificateTransformer.requiredResources
	#transform: #CertificateTransformer.#transform
}
copy: core.#Provider & {metadata: name: "copy", transformers: (#Copy.metadata.fqn): #Copy}
`
	root := strings.Replace(teamRoot, "certs:      teamcerts.provider", "certs:      teamcerts.provider\n\tcopy:       teamcerts.copy", 1)
	err := renderErr(t, teamDir(t, dup, root), "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), "CertificateTransformer (provider certs)"))
	assert.Check(t, is.Contains(err.Error(), "CertificateCopyTransformer (provider copy)"))
	assert.Check(t, is.Contains(err.Error(), "both render Certificate"))
	assert.Check(t, is.Contains(err.Error(), "certs/certs.cue:"), "the error points at the transformers' declarations")
}

func TestTransformerOutputWithoutKindIsAnError(t *testing.T) {
	noKind := strings.Replace(certsProvider, `kind:       "Certificate"`, "", 1)
	err := renderErr(t, teamDir(t, noKind, teamRoot), "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	assert.Check(t, is.Contains(err.Error(), "CertificateTransformer (provider certs)"))
	assert.Check(t, is.Contains(err.Error(), "without kind"))
	assert.Check(t, is.Contains(err.Error(), "certs/certs.cue:13"), "the error points at the transformer's declaration")
}

// misuse renders appModule's shape with one web component body and
// returns the error.
func misuse(t *testing.T, component string) error {
	t.Helper()
	module := `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {}

#components: web: {
` + component + `
}
`
	dir := deployment(t, `releases: app: {#module: _app, metadata: namespace: "shop"}`, "app/app.cue", module)
	err := renderErr(t, dir, "")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	return err
}

func TestSchemaMisuseNamesPathValueAndPosition(t *testing.T) {
	for _, tc := range []struct {
		name, component string
		want            []string
	}{
		{
			name: "env reference without key",
			component: `	core.#Workload
	spec: workload: {type: "stateless", container: {image: "x", env: PASSWORD: {secret: "db"}}}`,
			want: []string{"spec.workload.container.env.PASSWORD", "app/app.cue:13"},
		},
		{
			name: "probe with two handlers",
			component: `	core.#Workload
	spec: workload: {type: "stateless", container: {image: "x", probes: liveness: {http: port: 80, tcp: port: 80}}}`,
			want: []string{"spec.workload.container.probes.liveness", "app/app.cue:13"},
		},
		{
			name: "volume with two sources",
			component: `	core.#Workload
	spec: workload: {type: "stateless", container: image: "x", volumes: data: {claim: "a", emptyDir: {}}}`,
			want: []string{"spec.workload.volumes.data", "app/app.cue:13"},
		},
		{
			name: "strategy on a StatefulSet",
			component: `	core.#Workload
	spec: workload: {type: "stateful", container: image: "x", strategy: type: "Recreate"}`,
			want: []string{"spec.workload.strategy", "not allowed", "app/app.cue:13"},
		},
		{
			name: "pod label overriding an identity label",
			component: `	core.#Workload
	spec: workload: {type: "stateless", container: image: "x", pod: labels: "app.kubernetes.io/name": "other"}`,
			want: []string{"app.kubernetes.io/name", "conflicting values", `"other"`, `"web"`, "app/app.cue:13"},
		},
		{
			name: "autoscaling without a metric",
			component: `	core.#Workload
	core.#Autoscaling
	spec: {workload: {type: "stateless", container: image: "x"}, autoscaling: maxReplicas: 3}`,
			want: []string{"spec.autoscaling", "app/app.cue:14"},
		},
		{
			name: "autoscaling a daemon",
			component: `	core.#Workload
	core.#Autoscaling
	spec: {workload: {type: "daemon", container: image: "x"}, autoscaling: {maxReplicas: 3, cpu: 50}}`,
			want: []string{`component "web"`, "autoscaling scales stateless and stateful workloads, not a daemon one"},
		},
		{
			name: "object without kind",
			component: `	core.#Objects
	spec: objects: [{apiVersion: "v1", metadata: name: "x"}]`,
			want: []string{`component "web"`, "spec.objects.0.kind", "app/app.cue:13"},
		},
		{
			name: "cluster-scoped object with a namespace",
			component: `	core.#Objects
	spec: objects: [{apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: {name: "x", namespace: "shop"}}]`,
			want: []string{`component "web"`, "output.0.metadata.namespace", "ClusterRole is cluster-scoped: remove metadata.namespace"},
		},
		{
			name: "object overriding an identity label",
			component: `	core.#Objects
	spec: objects: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "x", labels: "component.opmodel.dev/name": "other"}}]`,
			want: []string{`component "web"`, "component.opmodel.dev/name", `"other"`, `"web"`, "app/app.cue:13"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := misuse(t, tc.component)
			for _, w := range tc.want {
				assert.Check(t, is.Contains(err.Error(), w))
			}
		})
	}
}

// Objects brought in from a Helm chart (helm template) carry the
// ecosystem's recommended labels with the chart's values: they render as
// they are, with opm's managed-by and the object's own name, instance and
// version, and every identity label opm needs.
func TestRawObjectsKeepTheirRecommendedLabels(t *testing.T) {
	module := `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {}

#components: raw: {
	core.#Objects
	spec: objects: [{
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {
			name: "web"
			labels: {
				"app.kubernetes.io/name":       "web"
				"app.kubernetes.io/instance":   "web"
				"app.kubernetes.io/version":    "1.16.0"
				"app.kubernetes.io/managed-by": "Helm"
				"helm.sh/chart":                "web-0.1.0"
			}
		}
		data: key: "value"
	}]
}
`
	r := renderOne(t, deployment(t, `releases: app: {#module: _app, metadata: namespace: "shop"}`, "app/app.cue", module), "")
	assert.Equal(t, len(r.Resources), 1)
	labels := r.Resources[0].Object.GetLabels()
	for k, want := range map[string]string{
		"app.kubernetes.io/managed-by":    "open-platform-model",
		"app.kubernetes.io/name":          "web",
		"app.kubernetes.io/instance":      "web",
		"app.kubernetes.io/version":       "1.16.0",
		"helm.sh/chart":                   "web-0.1.0",
		"component.opmodel.dev/name":      "raw",
		"module-release.opmodel.dev/name": "app",
	} {
		assert.Check(t, is.Equal(labels[k], want), k)
	}
	assert.Check(t, labels["module-release.opmodel.dev/uuid"] != "")
	assert.Equal(t, r.Resources[0].Object.Object["data"].(map[string]any)["key"], "value")
}

// An object that names another namespace keeps it (helm template puts
// leader-election Roles in kube-system); the environment's
// namespaces.allowed decides, and its refusal says where to allow it.
func TestRawObjectInAnotherNamespace(t *testing.T) {
	module := `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {}

#components: web: {
	core.#Objects
	spec: objects: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "x", namespace: "elsewhere"}}, {apiVersion: "v1", kind: "ConfigMap", metadata: name: "y"}]
}
`
	refused := deployment(t, `environments: staging: namespace: "shop"
releases: app: #module: _app`, "app/app.cue", module)
	err := renderErr(t, refused, "staging")
	assert.Check(t, is.Contains(err.Error(), `renders ConfigMap x into namespace "elsewhere", which environment "staging" does not allow`))
	assert.Check(t, is.Contains(err.Error(), `add "elsewhere" to `+"`namespaces: allowed:`"+` in environment staging`))

	allowed := deployment(t, `environments: staging: {namespace: "shop", namespaces: allowed: ["shop", "elsewhere"]}
releases: app: #module: _app`, "app/app.cue", module)
	rel := renderOne(t, allowed, "staging")
	got := map[string]string{}
	for _, r := range rel.Resources {
		got[r.Object.GetName()] = r.Object.GetNamespace()
	}
	assert.DeepEqual(t, got, map[string]string{"x": "elsewhere", "y": "shop"})
}

// helm template output as it is: several documents per file, RBAC names
// with ":", empty documents; a problem names the file, line and column.
func TestManifestsTakeHelmTemplateOutput(t *testing.T) {
	module := `@extern(embed)

package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {}

#components: web: {
	core.#Manifests
	spec: manifests: _chart
}

_chart: _ @embed(glob="chart/*.yaml", type=text)
`
	rbac := `---
# Source: web/templates/rbac.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: web-webhook:subjectaccessreviews
rules: []
---
# Source: web/templates/rbac.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: web:leaderelection
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: "web:leaderelection"}
subjects: []
---
`
	cm := "---\n# Source: web/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata: {a: b}\n"
	dir := deployment(t, `environments: staging: {namespace: "shop", namespaces: clusterScoped: true}
releases: app: #module: _app`, "app/app.cue", module, "app/chart/rbac.yaml", rbac, "app/chart/cm.yaml", cm)
	rel := renderOne(t, dir, "staging")
	var names []string
	for _, r := range rel.Resources {
		names = append(names, r.Object.GetKind()+"/"+r.Object.GetName())
	}
	slices.Sort(names)
	assert.DeepEqual(t, names, []string{"ClusterRole/web-webhook:subjectaccessreviews", "ConfigMap/web", "RoleBinding/web:leaderelection"})

	bad := deployment(t, `environments: staging: {namespace: "shop", namespaces: clusterScoped: true}
releases: app: #module: _app`, "app/app.cue", module, "app/chart/rbac.yaml", rbac,
		"app/chart/cm.yaml", strings.Replace(cm, "name: web", "name: Web_Settings", 1))
	err := renderErr(t, bad, "staging")
	assert.Check(t, is.Contains(err.Error(), `chart/cm.yaml:6:9 (document 1 of the file): metadata.name: invalid value "Web_Settings"`), err.Error())

	// Embedded as values, a file with several documents is CUE's
	// "streaming not implemented": opm names the file and the fix.
	asValues := deployment(t, `environments: staging: {namespace: "shop", namespaces: clusterScoped: true}
releases: app: #module: _app`, "app/app.cue", strings.Replace(strings.Replace(module, ", type=text", "", 1), "core.#Manifests\n\tspec: manifests: _chart", "core.#Objects\n\tspec: objects: [for _, o in _chart {o}]", 1),
		"app/chart/rbac.yaml", rbac, "app/chart/cm.yaml", cm)
	err = renderErr(t, asValues, "staging")
	assert.Check(t, is.Contains(err.Error(), "streaming not implemented"))
	assert.Check(t, is.Contains(err.Error(), "reads chart/rbac.yaml (2 documents), which CUE embeds only as text"), err.Error())
	assert.Check(t, is.Contains(err.Error(), "core.#Manifests"))
}
