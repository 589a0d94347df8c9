package deploytest

import "testing"

// Small modules of OPM's v2 shape, written for this project's tests (not
// upstream's: ../shared/opm-v2 and internal/opmv2test serve those): a
// core with #Module, #Component and #ModuleInstance, and a catalog whose
// transformers exercise upstream's matching rules — a label a transformer
// requires is matched against a component's matchLabels (derived from its
// primitives), never its metadata.labels; a trait may be optional; an
// output is one object or a list. Publish them with Registry(t,
// V2Modules()...).

// V2Core is a core@v2-shaped core: what engine/opmv2 reads of one.
var V2Core = Module{Path: "opmodel.dev/core@v2", Version: "v2.0.0", Files: map[string]string{
	"cue.mod/module.cue": "module: \"opmodel.dev/core@v2\"\nlanguage: version: \"v0.12.0\"\n",
	"core.cue": `package core

import cueuuid "uuid"

OPMNamespace: "11bc6112-a6e8-4021-bec9-b3ad246f9466"

// #Primitive is a resource or trait: an FQN, the labels transformers match
// on, a spec.
#Primitive: {
	metadata: fqn!: string
	matchLabels?: [string]: string
	optional?: bool
	spec?: {...}
	...
}

#Component: {
	kind: "Component"
	metadata: {
		name!: string
		labels?: [string]: string
		annotations?: [string]: string
	}
	#resources: [string]: #Primitive
	#traits?: [string]: #Primitive
	matchLabels: {
		for _, r in #resources if r.matchLabels != _|_ {r.matchLabels}
		if #traits != _|_ for _, t in #traits if t.matchLabels != _|_ {t.matchLabels}
	}
	#instance: _
	// The spec is what the primitives declare.
	spec: {
		for _, r in #resources if r.spec != _|_ {r.spec}
		if #traits != _|_ for _, t in #traits if t.spec != _|_ {t.spec}
	}
}

#Module: {
	kind: "Module"
	metadata: {
		name!:       string
		modulePath!: string
		version!:    string
		fqn:         modulePath
		uuid:        cueuuid.SHA1(OPMNamespace, fqn)
		labels: {
			"module.opmodel.dev/name":    name
			"module.opmodel.dev/version": version
		}
	}
	#config:     _
	debugValues: _
	#ctx: instance: {
		name!:         string
		namespace!:    string
		uuid!:         string
		clusterDomain: *"cluster.local" | string
	}
	#components: [Id=string]: #Component & {
		metadata: name: *Id | string
		#instance: #ctx.instance
	}
}

#ModuleInstance: {
	kind: "ModuleInstance"
	metadata: {
		name!:      string
		namespace!: string
		fqn:        "\(#module.metadata.fqn):\(name):\(namespace)"
		uuid:       cueuuid.SHA1(OPMNamespace, fqn)
		labels: {
			for k, v in #module.metadata.labels {(k): v}
			"module-instance.opmodel.dev/name": name
			"module-instance.opmodel.dev/uuid": uuid
		}
	}
	#module!: #Module & {#ctx: instance: {name: metadata.name, namespace: metadata.namespace, uuid: metadata.uuid}}
	let unified = #module & {#config: values}
	components: {for n, c in unified.#components {(n): c}}
	values: _
}
`,
}}

// V2Catalog is a catalog for V2Core: a container resource (its workload
// type a match label), an expose trait, a configs resource, an objects
// resource, and transformers for stateless (Deployment), task (Job),
// expose (Service), configs (a list of ConfigMaps) and objects (each as
// it is); a backup trait none handles.
var V2Catalog = Module{Path: "opmodel.dev/catalogs/opm@v2", Version: "v2.0.0", Files: map[string]string{
	"cue.mod/module.cue": "module: \"opmodel.dev/catalogs/opm@v2\"\nlanguage: version: \"v0.12.0\"\ndeps: \"opmodel.dev/core@v2\": v: \"v2.0.0\"\n",
	"catalog.cue": `package opm

import c "opmodel.dev/core@v2"

#ContainerFQN: "example.test/resources/container@v1"
#ExposeFQN:    "example.test/traits/expose@v1"
#BackupFQN:    "example.test/traits/backup@v1"
#ConfigsFQN:   "example.test/resources/configs@v1"
#ObjectsFQN:   "example.test/resources/objects@v1"

#Container: {
	metadata: fqn: #ContainerFQN
	matchLabels: "core.opmodel.dev/workload-type": "stateless" | "task"
	spec: container: {image!: string, port: *8080 | int}
}
#Expose: {
	metadata: fqn: #ExposeFQN
	optional?: bool
	spec: expose: port: *80 | int
}
// #Backup is a trait no transformer of this catalog handles.
#Backup: {
	metadata: fqn: #BackupFQN
	optional?: bool
	spec: backup: schedule: *"@daily" | string
}
#Configs: {
	metadata: fqn: #ConfigsFQN
	spec: configs: [string]: [string]: string
}

// #Objects are Kubernetes objects as they are, with the instance's labels,
// in the instance's namespace unless they name one (the older line's
// core.#Objects).
#Objects: {
	metadata: fqn: #ObjectsFQN
	spec: objects: [...{apiVersion!: string, kind!: string, metadata: {name!: string, ...}, ...}]
}

#Stateless: c.#Component & {#resources: (#ContainerFQN): #Container & {matchLabels: "core.opmodel.dev/workload-type": "stateless"}}
#Task: c.#Component & {#resources: (#ContainerFQN): #Container & {matchLabels: "core.opmodel.dev/workload-type": "task"}}

#meta: {
	#context:   _
	#component: _
	name:      "\(#context.#moduleInstanceMetadata.name)-\(#component.metadata.name)"
	namespace: #context.#moduleInstanceMetadata.namespace
	labels: {
		for k, v in #context.#moduleInstanceMetadata.labels {(k): v}
		"app.kubernetes.io/managed-by": #context.#runtimeName
		"app.kubernetes.io/name":       #component.metadata.name
	}
}

#transformers: {
	"example.test/transformers/deployment@1.0.0": {
		metadata: fqn: "example.test/transformers/deployment@1.0.0"
		requiredLabels: "core.opmodel.dev/workload-type": "stateless"
		requiredResources: (#ContainerFQN): _
		optionalTraits: (#ExposeFQN): _
		#transform: {
			#component: _
			#context:   _
			let ctx = #context
			let comp = #component
			let m = #meta & {#context: ctx, #component: comp}
			output: {
				apiVersion: "apps/v1"
				kind:       "Deployment"
				metadata: {name: m.name, namespace: m.namespace, labels: m.labels}
				spec: {
					selector: matchLabels: "app.kubernetes.io/name": #component.metadata.name
					template: {
						metadata: labels: "app.kubernetes.io/name": #component.metadata.name
						spec: containers: [{name: #component.metadata.name, image: #component.spec.container.image}]
					}
				}
			}
		}
	}
	"example.test/transformers/job@1.0.0": {
		metadata: fqn: "example.test/transformers/job@1.0.0"
		requiredLabels: "core.opmodel.dev/workload-type": "task"
		requiredResources: (#ContainerFQN): _
		#transform: {
			#component: _
			#context:   _
			let ctx = #context
			let comp = #component
			let m = #meta & {#context: ctx, #component: comp}
			output: {
				apiVersion: "batch/v1"
				kind:       "Job"
				metadata: {name: m.name, namespace: m.namespace, labels: m.labels}
				spec: template: spec: {
					restartPolicy: "Never"
					containers: [{name: #component.metadata.name, image: #component.spec.container.image}]
				}
			}
		}
	}
	"example.test/transformers/service@1.0.0": {
		metadata: fqn: "example.test/transformers/service@1.0.0"
		requiredResources: (#ContainerFQN): _
		requiredTraits: (#ExposeFQN): _
		#transform: {
			#component: _
			#context:   _
			let ctx = #context
			let comp = #component
			let m = #meta & {#context: ctx, #component: comp}
			output: {
				apiVersion: "v1"
				kind:       "Service"
				metadata: {name: m.name, namespace: m.namespace, labels: m.labels}
				spec: {
					selector: "app.kubernetes.io/name": #component.metadata.name
					ports: [{port: #component.spec.expose.port, targetPort: #component.spec.container.port}]
				}
			}
		}
	}
	"example.test/transformers/objects@1.0.0": {
		metadata: fqn: "example.test/transformers/objects@1.0.0"
		requiredResources: (#ObjectsFQN): _
		#transform: {
			#component: _
			#context:   _
			output: [for o in #component.spec.objects {
				o
				metadata: {
					// An object may name its own namespace (the reach decides).
					namespace: *#context.#moduleInstanceMetadata.namespace | string
					labels: {
						for k, v in #context.#moduleInstanceMetadata.labels {(k): v}
						"app.kubernetes.io/managed-by": #context.#runtimeName
					}
				}
			}]
		}
	}
	"example.test/transformers/configs@1.0.0": {
		metadata: fqn: "example.test/transformers/configs@1.0.0"
		requiredResources: (#ConfigsFQN): _
		#transform: {
			#component: _
			#context:   _
			let ctx = #context
			let comp = #component
			let m = #meta & {#context: ctx, #component: comp}
			output: [for name, data in #component.spec.configs {
				apiVersion: "v1"
				kind:       "ConfigMap"
				metadata: {"name": "\(m.name)-\(name)", namespace: m.namespace, labels: m.labels}
				"data": data
			}]
		}
	}
}
`,
}}

// V2Modules are V2Core and V2Catalog, for Registry.
func V2Modules() []Module { return []Module{V2Core, V2Catalog} }

// V2Deployment writes a deployment directory whose release "app" is the
// module `app` (a package of the deployment, written from components: the
// body of its #components) on V2Catalog, in environment "test"
// (namespace ns).
func V2Deployment(t testing.TB, ns, config, components string) string {
	return Write(t, map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: {\n\t\"opmodel.dev/core@v2\": v: \"v2.0.0\"\n\t\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0\"\n}\n",
		"app/app.cue": `package app

import (
	c "opmodel.dev/core@v2"
	cat "opmodel.dev/catalogs/opm@v2"
)

c.#Module

metadata: {name: "app", modulePath: "test.example/deploy/app@v0", version: "1.0.0"}

#config: {
` + config + `
}
debugValues: {}

_catalog: cat.#ContainerFQN

#components: {
` + components + `
}
`,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmod "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
environments: test: {namespace: "` + ns + `", platform: registry: "opmodel.dev/catalogs/opm@v2": version: "2.0.0"}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: app: #module: appmod
`,
	})
}
