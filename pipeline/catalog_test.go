package pipeline_test

import (
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// everyKind is a module with one component per transformer of the
// catalog's Kubernetes provider.
const everyKind = `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: image: *"registry.invalid/opm-test/app:1.0" | string

let c = {image: #config.image, ports: http: containerPort: 8080}

#components: {
	web: {
		core.#Workload
		core.#Service
		core.#Ingress
		core.#ServiceAccount
		core.#Configs
		core.#Secrets
		spec: {
			workload: {type: "stateless", replicas: 2, serviceAccountName: "web", container: c & {env: A: "1"},
				volumes: {settings: configMap: "web-settings", creds: secret: "web-creds"}}
			service: ports: http: {port: 80, targetPort: 8080}
			ingress: {host: "web.example.com", servicePort: 80, className: "nginx", tlsSecretName: "web-tls"}
			serviceAccount: {}
			configs: "web-settings": data: greeting: "hello"
			secrets: "web-creds": data: password: "s3cret"
		}
	}
	db: {
		core.#Workload
		core.#Service
		core.#Volumes
		spec: {
			workload: {type: "stateful", container: c & {volumeMounts: data: mountPath: "/data"}, volumes: data: claim: "db-data"}
			service: ports: pg: port: 5432
			volumes: "db-data": {size: "1Gi", storageClassName: "standard"}
		}
	}
	agent: {core.#Workload, spec: workload: {type: "daemon", container: c}}
	migrate: {core.#Workload, spec: workload: {type: "task", container: c & {command: ["migrate"], args: ["--up"]}}}
	backup: {core.#Workload, spec: workload: {type: "scheduled-task", schedule: "0 3 * * *", container: c}}
}
`

func TestCatalogRendersEveryKindTheAPIServerAccepts(t *testing.T) {
	ns := env.Namespace(t)
	root := strings.Replace(deploytestRoot(ns), `metadata: namespace: "`+ns+`"`, `metadata: namespace: "every-kind"`, 1)
	dir := deploytest.Write(t, map[string]string{"app/app.cue": everyKind, "deploy.cue": root})
	rels, err := render.Render(t.Context(), render.Options{Dir: dir})
	assert.NilError(t, err)
	res := rels[0].Resources

	var kinds []string
	for _, r := range res {
		kinds = append(kinds, r.Object.GetKind())
	}
	for _, k := range []string{"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "Ingress", "ServiceAccount"} {
		assert.Check(t, slices.Contains(kinds, k), "no %s rendered: %v", k, kinds)
	}
	p, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: dir}})
	assert.NilError(t, err)
	y, err := p.YAML()
	assert.NilError(t, err)
	golden.Assert(t, string(y), "render/every-kind.yaml")

	// The API server validates each object (a server-side dry run): a
	// transformer that renders an invalid field fails here.
	cl, err := kube.FromConfig(env.Config, "opm-test", kube.Options{})
	assert.NilError(t, err)
	client := objects.New(cl, objects.Options{DryRun: true})
	for _, r := range res {
		r.Object.SetNamespace(ns)
		got := client.Apply(t.Context(), r, nil, true)
		assert.Check(t, got.Err == nil, "%s rejected: %v", r.ID(), got.Err)
	}
}
