package deploytest

// Modules written for a catalog of the OPM component model, the way OPM's
// own catalog (opmodel.dev/core, resources, traits, providers) is laid out,
// but written here and small. Tests publish them with Registry and render a
// module that pins them, so nothing the engine embeds can stand in for them.

// OPMCoreVersion is a version of opmodel.dev/core the embedded catalog has
// never had.
const OPMCoreVersion = "v0.9.0"

// OPMContextMarker is a label only this core's #TransformerContext puts on
// objects: seeing it proves the registry's core rendered them.
const OPMContextMarker = "core.test.opmodel.dev/context"

// OPMCore is opmodel.dev/core@v0 at OPMCoreVersion: closed components of
// #resources/#traits keyed by FQN, each adding to a closed spec and to the
// component's labels; modules with author values, defaultNamespace and
// #policies; transformers with #transform(#component, #context).
var OPMCore = Module{Path: "opmodel.dev/core@v0", Version: OPMCoreVersion, Files: map[string]string{
	"core.cue": `package core

import "uuid"

// #Marker exists only in this version of the core.
#Marker: "opmodel.dev/core ` + OPMCoreVersion + ` from the test registry"

#LabelsAnnotationsType: [string]: string | int | bool
#NameType: string & =~"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
_namespace: "11bc6112-a6e8-4021-bec9-b3ad246f9466"

#Definition: {
	apiVersion: "opmodel.dev/core/v0"
	kind:       string
	metadata: {
		apiVersion!:  string
		name!:        #NameType
		fqn!:         string
		description?: string
		labels?:      #LabelsAnnotationsType
		annotations?: #LabelsAnnotationsType
	}
	#spec!:     _
	#defaults?: _
}

#Resource: close({#Definition, kind: "Resource"})
#Trait: close({#Definition, kind: "Trait", appliesTo?: [..._]})

#Component: close({
	apiVersion: "opmodel.dev/core/v0"
	kind:       "Component"
	metadata: {
		name!: #NameType
		labels: #LabelsAnnotationsType & {
			for _, d in #resources if d.metadata.labels != _|_ {for k, v in d.metadata.labels {(k): v}}
			if #traits != _|_ for _, d in #traits if d.metadata.labels != _|_ {for k, v in d.metadata.labels {(k): v}}
		}
		annotations?: #LabelsAnnotationsType
	}
	#resources: [string]: _
	#traits?: [string]: _
	_fields: {
		for _, d in #resources {for k, v in d.#spec {(k): v}}
		if #traits != _|_ for _, d in #traits {for k, v in d.#spec {(k): v}}
	}
	spec: close({_fields})
})

#Module: close({
	apiVersion: "opmodel.dev/core/v0"
	kind:       "Module"
	metadata: {
		apiVersion!:       string
		name!:             #NameType
		version!:          string
		fqn:               "\(apiVersion)#\(name)"
		identity:          uuid.SHA1(_namespace, "\(fqn):\(version)")
		defaultNamespace?: string
		description?:      string
		labels: {
			"module.opmodel.dev/name":    name
			"module.opmodel.dev/version": version
			"module.opmodel.dev/uuid":    identity
		}
		annotations?: #LabelsAnnotationsType
	}
	#components: [Id=string]: #Component & {metadata: {name: string | *Id, labels: "component.opmodel.dev/name": name}}
	#policies?: [string]: {appliesTo: {...}, ...}
	#config: _
	values:  _
})

#TransformerContext: {
	#moduleReleaseMetadata: {
		name!:        #NameType
		namespace!:   #NameType
		fqn:          string
		version:      string
		identity:     string
		labels?:      #LabelsAnnotationsType
		annotations?: #LabelsAnnotationsType
	}
	#componentMetadata: {
		name!:        #NameType
		labels?:      #LabelsAnnotationsType
		annotations?: #LabelsAnnotationsType
	}
	name:      string
	namespace: string
	labels: {[string]: string}
	labels: {
		if #moduleReleaseMetadata.labels != _|_ {for k, v in #moduleReleaseMetadata.labels {(k): "\(v)"}}
		if #componentMetadata.labels != _|_ {for k, v in #componentMetadata.labels {(k): "\(v)"}}
		"app.kubernetes.io/name":       #componentMetadata.name
		"app.kubernetes.io/managed-by": "open-platform-model"
		"` + OPMContextMarker + `":  "` + OPMCoreVersion + `"
	}
	selector: "app.kubernetes.io/name": #componentMetadata.name
}

#Transformer: {
	apiVersion: "opmodel.dev/core/v0"
	kind:       "Transformer"
	metadata: {
		apiVersion!:  string
		name!:        #NameType
		fqn!:         string
		description?: string
		annotations?: #LabelsAnnotationsType
	}
	requiredLabels?: #LabelsAnnotationsType
	requiredResources: [string]: _
	optionalResources: [string]: _
	requiredTraits: [string]: _
	optionalTraits: [string]: _
	#transform: {
		#component: _
		#context:   #TransformerContext
		output: {...} | [...]
	}
}

#Provider: {
	metadata: {name!: #NameType, description?: string, version?: string}
	transformers: [string]: #Transformer
}
`}}

// OPMResources is a resources/traits module: a Container resource (a
// workload-type label decides the workload kind), a ConfigMaps resource
// (list-output annotation) and Scaling and Expose traits.
var OPMResources = Module{Path: "opmodel.dev/resources@v0", Version: "v0.9.1", Files: map[string]string{
	"cue.mod/module.cue": `module: "opmodel.dev/resources@v0"
language: version: "v0.12.0"
deps: "opmodel.dev/core@v0": v: "` + OPMCoreVersion + `"
`,
	"workload/workload.cue": `package workload

import core "opmodel.dev/core@v0"

#ContainerResource: close(core.#Resource & {
	metadata: {apiVersion: "opmodel.dev/resources/workload@v0", name: "container", fqn: "opmodel.dev/resources/workload@v0#Container"}
	#spec: container: {
		name!:  string
		image!: string
		ports?: [Name=string]: {name: Name, targetPort!: int}
		env?: [Name=string]: {name: Name, value!: string}
	}
})

#Container: close(core.#Component & {
	metadata: labels: "core.opmodel.dev/workload-type"!: "stateless" | "stateful"
	#resources: (#ContainerResource.metadata.fqn): #ContainerResource
})

#ScalingTrait: close(core.#Trait & {
	metadata: {apiVersion: "opmodel.dev/traits/workload@v0", name: "scaling", fqn: "opmodel.dev/traits/workload@v0#Scaling"}
	appliesTo: [#ContainerResource]
	#defaults: count: 1
	#spec: scaling: count: int & >=0
})

#Scaling: close(core.#Component & {#traits: (#ScalingTrait.metadata.fqn): #ScalingTrait})

#ExposeTrait: close(core.#Trait & {
	metadata: {apiVersion: "opmodel.dev/traits/network@v0", name: "expose", fqn: "opmodel.dev/traits/network@v0#Expose"}
	appliesTo: [#ContainerResource]
	#spec: expose: ports: [Name=string]: {name: Name, exposedPort!: int, targetPort!: int}
})

#Expose: close(core.#Component & {#traits: (#ExposeTrait.metadata.fqn): #ExposeTrait})
`,
	"config/config.cue": `package config

import core "opmodel.dev/core@v0"

#ConfigMapsResource: close(core.#Resource & {
	metadata: {apiVersion: "opmodel.dev/resources/config@v0", name: "config-maps", fqn: "opmodel.dev/resources/config@v0#ConfigMaps"}
	#spec: configMaps: [string]: data: [string]: string
})

#ConfigMaps: close(core.#Component & {
	metadata: annotations: "transformer.opmodel.dev/list-output": true
	#resources: (#ConfigMapsResource.metadata.fqn): #ConfigMapsResource
})
`,
}}

// OPMProvider is a provider module whose transformers match by FQN:
// Deployment (one object, optional Scaling trait), ConfigMaps (a map of
// objects) and Service (a list, from the Expose trait).
var OPMProvider = Module{Path: "opmodel.dev/providers@v0", Version: "v0.9.2", Files: map[string]string{
	"cue.mod/module.cue": `module: "opmodel.dev/providers@v0"
language: version: "v0.12.0"
deps: {
	"opmodel.dev/core@v0": v: "` + OPMCoreVersion + `"
	"opmodel.dev/resources@v0": v: "v0.9.1"
}
`,
	"kubernetes/provider.cue": `package kubernetes

import (
	core "opmodel.dev/core@v0"
	workload "opmodel.dev/resources/workload@v0"
	config "opmodel.dev/resources/config@v0"
)

#Provider: core.#Provider & {
	metadata: name: "kubernetes"
	transformers: {
		(#DeploymentTransformer.metadata.fqn): #DeploymentTransformer
		(#ConfigMapTransformer.metadata.fqn):  #ConfigMapTransformer
		(#ServiceTransformer.metadata.fqn):    #ServiceTransformer
	}
}

_api: "opmodel.dev/providers/kubernetes@v0"

#DeploymentTransformer: core.#Transformer & {
	metadata: {apiVersion: _api, name: "deployment-transformer", fqn: "\(_api)#DeploymentTransformer"}
	requiredLabels: "core.opmodel.dev/workload-type": "stateless"
	requiredResources: (workload.#ContainerResource.metadata.fqn): workload.#ContainerResource
	optionalTraits: {
		(workload.#ScalingTrait.metadata.fqn): workload.#ScalingTrait
		(workload.#ExposeTrait.metadata.fqn):  workload.#ExposeTrait
	}
	#transform: {
		#component: _
		#context:   core.#TransformerContext
		let c = #component.spec.container
		output: {
			apiVersion: "apps/v1"
			kind:       "Deployment"
			metadata: {name: #component.metadata.name, namespace: #context.namespace, labels: #context.labels}
			spec: {
				replicas: *optionalTraits[workload.#ScalingTrait.metadata.fqn].#defaults.count | int
				if #component.spec.scaling != _|_ {replicas: #component.spec.scaling.count}
				selector: matchLabels: #context.selector
				template: {
					metadata: labels: #context.selector
					spec: containers: [{
						name:  c.name
						image: c.image
						if c.env != _|_ {env: [for _, e in c.env {e}]}
						if c.ports != _|_ {ports: [for _, p in c.ports {name: p.name, containerPort: p.targetPort}]}
					}]
				}
			}
		}
	}
}

#ConfigMapTransformer: core.#Transformer & {
	metadata: {apiVersion: _api, name: "configmap-transformer", fqn: "\(_api)#ConfigMapTransformer"}
	requiredResources: (config.#ConfigMapsResource.metadata.fqn): config.#ConfigMapsResource
	#transform: {
		#component: _
		#context:   core.#TransformerContext
		output: {for name, cm in #component.spec.configMaps {(name): {
			apiVersion: "v1"
			kind:       "ConfigMap"
			metadata: {"name": name, namespace: #context.namespace, labels: #context.labels}
			data: cm.data
		}}}
	}
}

#ServiceTransformer: core.#Transformer & {
	metadata: {apiVersion: _api, name: "service-transformer", fqn: "\(_api)#ServiceTransformer"}
	requiredResources: (workload.#ContainerResource.metadata.fqn): workload.#ContainerResource
	requiredTraits: (workload.#ExposeTrait.metadata.fqn): workload.#ExposeTrait
	#transform: {
		#component: _
		#context:   core.#TransformerContext
		output: [{
			apiVersion: "v1"
			kind:       "Service"
			metadata: {name: #component.metadata.name, namespace: #context.namespace, labels: #context.labels}
			spec: {
				selector: #context.selector
				ports: [for _, p in #component.spec.expose.ports {name: p.name, port: p.exposedPort, targetPort: p.targetPort}]
			}
		}]
	}
}
`,
}}

// OPMApp is an application module written the way OPM's CLI examples are
// (package main, author values in values.cue, a defaultNamespace, a
// #policies entry), published as example.com/hello@v0.
var OPMApp = Module{Path: "example.com/hello@v0", Version: "v0.1.0", Files: map[string]string{
	"cue.mod/module.cue": `module: "example.com/hello@v0"
language: version: "v0.12.0"
deps: {
	"opmodel.dev/core@v0": v: "` + OPMCoreVersion + `"
	"opmodel.dev/resources@v0": v: "v0.9.1"
}
`,
	"module.cue": `package main

import core "opmodel.dev/core@v0"

core.#Module

metadata: {
	apiVersion:       "example.com/hello@v0"
	name:             "hello"
	version:          "0.1.0"
	defaultNamespace: "hello"
}

#config: {
	image:    string
	replicas: int & >=1
	greeting: string
}

values: #config

#policies: everything: appliesTo: matchLabels: "component.opmodel.dev/name": "web"
`,
	"values.cue": `package main

values: {
	image:    "ghcr.io/example/hello:1.0.0"
	replicas: 1
	greeting: "hello"
}
`,
	"components.cue": `package main

import (
	workload "opmodel.dev/resources/workload@v0"
	config "opmodel.dev/resources/config@v0"
)

#components: web: {
	workload.#Container
	workload.#Scaling
	workload.#Expose
	config.#ConfigMaps
	metadata: labels: "core.opmodel.dev/workload-type": "stateless"
	spec: {
		container: {
			name:  "web"
			image: #config.image
			ports: http: targetPort: 8080
			env: GREETING: value: #config.greeting
		}
		scaling: count: #config.replicas
		expose: ports: http: {exposedPort: 80, targetPort: 8080}
		configMaps: {
			"web-greeting": data: greeting: #config.greeting
			"web-static": data: "index.html": "<h1>hi</h1>"
		}
	}
}
`,
}}

// OPMModules are all of the above, for Registry.
func OPMModules() []Module { return []Module{OPMCore, OPMResources, OPMProvider, OPMApp} }

// OPMDeployment is a deployment directory's root package (deploy.cue) that
// releases OPMApp with OPMProvider, with a staging environment.
const OPMDeployment = `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	hellomodule "example.com/hello@v0:main"
	k8s "opmodel.dev/providers/kubernetes@v0"
)

providers: kubernetes: k8s.#Provider

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: staging: {
	namespace: "staging"
	metadata: labels: "opmodel.dev/tier": "non-production"
	values: replicas: 2
}

releases: hello: {#module: hellomodule, values: greeting: "hi"}
`

// OPMModuleFile is the deployment directory's cue.mod/module.cue for
// OPMDeployment.
const OPMModuleFile = `module: "test.example/opm-deploy@v0"
language: version: "v0.12.0"
deps: {
	"example.com/hello@v0": v: "v0.1.0"
	"opmodel.dev/providers@v0": v: "v0.9.2"
	"opmodel.dev/resources@v0": v: "v0.9.1"
	"opmodel.dev/core@v0": v: "` + OPMCoreVersion + `"
}
`
