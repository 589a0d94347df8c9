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
		core.#Autoscaling
		core.#DisruptionBudget
		core.#NetworkPolicy
		core.#RBAC
		spec: {
			workload: {
				type: "stateless", replicas: 2, serviceAccountName: "web"
				container: c & {
					imagePullPolicy: "IfNotPresent"
					env: {
						A:        "1"
						PASSWORD: {secret: "web-creds", key: "password"}
						GREETING: {configMap: "web-settings", key: "greeting", optional: true}
						POD_NS:   {field: "metadata.namespace"}
					}
					envFrom: [{configMap: "web-settings", prefix: "CFG_"}, {secret: "web-creds"}]
					volumeMounts: {
						settings: {mountPath: "/etc/web/greeting", subPath: "greeting", readOnly: true}
						creds: {mountPath: "/etc/web/creds", readOnly: true}
						tmp: mountPath: "/tmp"
					}
					resources: requests: {cpu: "100m", memory: "64Mi"}
					probes: {
						liveness: {http: {path: "/healthz", port: 8080}, periodSeconds: 10, failureThreshold: 3}
						readiness: {tcp: port: "http", initialDelaySeconds: 2}
						startup: {exec: command: ["true"], periodSeconds: 5, failureThreshold: 30}
					}
					securityContext: {readOnlyRootFilesystem: true, runAsUser: 10001}
				}
				initContainers: [{name: "init-schema", image: c.image, command: ["migrate"]}]
				sidecars: [{name: "proxy", image: "registry.invalid/opm-test/proxy:1.0", ports: admin: containerPort: 9901}]
				imagePullSecrets: ["registry-creds"]
				securityContext: {runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001}
				nodeSelector: "kubernetes.io/os": "linux"
				tolerations: [{key: "dedicated", value: "web", effect: "NoSchedule"}]
				affinity: podAntiAffinity: preferredDuringSchedulingIgnoredDuringExecution: [{
					weight: 50
					podAffinityTerm: {topologyKey: "kubernetes.io/hostname", labelSelector: matchLabels: "app.kubernetes.io/name": "web"}
				}]
				topologySpreadConstraints: [{maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway"}]
				terminationGracePeriodSeconds: 45
				pod: {labels: team: "storefront", annotations: "prometheus.io/scrape": "true"}
				annotations: "deployment.kubernetes.io/note": "rolled by opm"
				strategy: rollingUpdate: {maxSurge: "25%", maxUnavailable: 0}
				volumes: {settings: configMap: "web-settings", creds: {secret: "web-creds", defaultMode: 0o400}, tmp: emptyDir: {medium: "Memory", sizeLimit: "64Mi"}}
			}
			service: {ports: http: {port: 80, targetPort: 8080}, type: "LoadBalancer", annotations: "service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
			ingress: {host: "web.example.com", servicePort: 80, className: "nginx", tlsSecretName: "web-tls", annotations: "nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
			serviceAccount: {}
			rbac: {
				rules: [{resources: ["configmaps"], verbs: ["get", "list", "watch"]}]
				clusterRules: [{resources: ["nodes"], verbs: ["get"]}]
			}
			configs: "web-settings": data: greeting: "hello"
			secrets: "web-creds": data: password: "s3cret"
			autoscaling: {minReplicas: 2, maxReplicas: 5, cpu: 75, memory: 80}
			disruptionBudget: minAvailable: 1
			networkPolicy: {
				ingress: [{namespaces: ["ingress-nginx"], ports: [{port: 8080}]}, {components: ["agent"]}]
				egress: [{components: ["db"], ports: [{port: 5432}]}, {namespaces: ["kube-system"], ports: [{port: 53, protocol: "UDP"}]}, {cidrs: ["10.0.0.0/8"]}]
			}
		}
	}
	crds: {
		core.#Objects
		spec: objects: [{
			apiVersion: "apiextensions.k8s.io/v1"
			kind:       "CustomResourceDefinition"
			metadata: name: "widgets.every-kind.test.example"
			spec: {
				group: "every-kind.test.example"
				scope: "Namespaced"
				names: {plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList"}
				versions: [{name: "v1", served: true, storage: true, schema: openAPIV3Schema: {type: "object", "x-kubernetes-preserve-unknown-fields": true}}]
			}
		}, {
			apiVersion: "v1"
			kind:       "LimitRange"
			metadata: {name: "defaults", labels: team: "platform"}
			spec: limits: [{type: "Container", default: memory: "256Mi"}]
		}]
	}
	// helm template output as it is: several documents in one file, RBAC
	// names with ":".
	chart: {
		core.#Manifests
		spec: manifests: "chart/templates/rbac.yaml": """
			---
			# Source: chart/templates/rbac.yaml
			apiVersion: rbac.authorization.k8s.io/v1
			kind: ClusterRole
			metadata:
			  name: every-kind:reader
			rules:
			  - apiGroups: [""]
			    resources: ["configmaps"]
			    verbs: ["get"]
			---
			# Source: chart/templates/rbac.yaml
			apiVersion: rbac.authorization.k8s.io/v1
			kind: Role
			metadata:
			  name: every-kind:leaderelection
			rules: []
			---
			"""
	}
	db: {
		core.#Workload
		core.#Service
		core.#Volumes
		spec: {
			workload: {
				type: "stateful", container: c & {volumeMounts: data: mountPath: "/data"}, volumes: data: claim: "db-data"
				podManagementPolicy: "Parallel"
				updateStrategy: rollingUpdate: partition: 0
			}
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
	for _, k := range []string{"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "Ingress", "ServiceAccount",
		"HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
		"CustomResourceDefinition", "LimitRange"} {
		assert.Check(t, slices.Contains(kinds, k), "no %s rendered: %v", k, kinds)
	}
	var names []string
	for _, r := range res {
		names = append(names, r.Object.GetName())
	}
	assert.Check(t, slices.Contains(names, "every-kind:reader") && slices.Contains(names, "every-kind:leaderelection"), "%v", names)
	p, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: dir}})
	assert.NilError(t, err)
	y, err := p.YAML()
	assert.NilError(t, err)
	golden.Assert(t, string(y), "render/every-kind.yaml")

	// The API server validates each object (a server-side dry run): a
	// transformer that renders an invalid field fails here.
	cl, err := kube.FromConfig(env.Config(), "opm-test", kube.Options{})
	assert.NilError(t, err)
	client := objects.New(cl, objects.Options{DryRun: true})
	for _, r := range res {
		if r.Object.GetNamespace() != "" {
			r.Object.SetNamespace(ns)
		}
		got := client.Apply(t.Context(), r, nil, true)
		assert.Check(t, got.Err == nil, "%s rejected: %v", r.ID(), got.Err)
	}
}
