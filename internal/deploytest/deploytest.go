// Package deploytest writes small deployment directories for tests: a CUE
// module with one module package ("app") whose object names, component
// name, workload kind and Secret value all come from values, so one
// directory plus a values file per step plays every inventory scenario
// (rename, component rename, kind change, Secret change).
package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AppModule is the module every fixture deploys. Values:
//
//	name       object names (Deployment/StatefulSet, Service; Secret name-creds)
//	component  the component name
//	type       "stateless" (Deployment) or "stateful" (StatefulSet)
//	image, replicas, port
//	secret     the Secret's password value; withSecret false drops the Secret
//	config     extra ConfigMap data (a ConfigMap "<name>-config" when set)
const AppModule = `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion: "test.example/deploy/app@v0"
	name:       "app"
	version:    "1.0.0"
}

#config: {
	name:       *"app" | string
	component:  *"web" | string
	type:       *"stateless" | "stateful"
	// Never pullable, so a workload is never ready on any cluster (kind
	// included), and "not ready yet" is the same everywhere tests run.
	image: *"registry.invalid/opm-test/app:1.0" | string
	replicas:   *1 | int
	port:       *80 | int
	secret:     *"s3cret" | string
	withSecret: *true | bool
	config?: [string]: string
}

#components: (#config.component): {
	core.#Workload
	core.#Service
	core.#Secrets
	core.#Configs
	spec: {
		workload: {
			type:     #config.type
			name:     #config.name
			replicas: #config.replicas
			container: {image: #config.image, ports: http: containerPort: 8080}
		}
		service: {name: #config.name, ports: http: {port: #config.port, targetPort: 8080}}
		secrets: {
			if #config.withSecret {"\(#config.name)-creds": data: password: #config.secret}
		}
		configs: {
			if #config.config != _|_ {"\(#config.name)-config": data: #config.config}
		}
	}
}
`

// Dir writes a deployment directory whose root package declares one
// release "app" of AppModule in namespace, with the given values (CUE
// struct body, may be empty), and returns its path.
func Dir(t testing.TB, namespace, values string) string {
	t.Helper()
	return Write(t, map[string]string{
		"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

releases: app: {
	#module: appmodule
	metadata: namespace: %q
	values: {%s}
}
`, namespace, values),
	})
}

// Write writes a deployment directory: cue.mod/module.cue, the app module
// and files (path → content), and returns its path. A file named
// "app/app.cue" replaces the module.
func Write(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"app/app.cue":        AppModule,
	}
	for k, v := range files {
		all[k] = v
	}
	for name, content := range all {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Values writes a values file (CUE) into a temporary directory and returns
// its path; pass it as a -f file to change values between steps.
func Values(t testing.TB, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.cue")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// HealthyModule is a module whose objects are healthy without controllers
// (a Service, a ConfigMap and a Secret), so a test of "everything became
// healthy" passes on the bare API server and on a full cluster alike.
// Values:
//
//	secret  the Secret's password value
//	stamp   the ConfigMap's stamp value
//	broken  adds a Deployment that never becomes ready on any cluster: its
//	        ServiceAccount and its claim do not exist, so its pods are never
//	        created or never scheduled
const HealthyModule = `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion: "test.example/deploy/app@v0"
	name:       "app"
	version:    "1.0.0"
}

#config: {
	secret: *"smoke-secret-value" | string
	stamp:  *"" | string
	broken: *false | bool
}

#components: web: {
	core.#Service
	core.#Secrets
	core.#Configs
	if #config.broken {core.#Workload}
	spec: {
		service: {name: "web", ports: http: {port: 80, targetPort: 8080}}
		secrets: "web-creds": data: password: #config.secret
		configs: "web-config": data: stamp: #config.stamp
		if #config.broken {
			workload: {
				type:               "stateless"
				name:               "web"
				serviceAccountName: "no-such-account"
				container: {image: "registry.invalid/opm-test/app:1.0", ports: http: containerPort: 8080}
				volumes: data: claim: "no-such-claim"
			}
		}
	}
}
`

// HealthyDir writes a deployment directory of HealthyModule whose root
// package declares the usual environments and releases maps plus body
// (which declares environments and releases of appmodule), and returns
// its path.
func HealthyDir(t testing.TB, body string) string {
	t.Helper()
	return Write(t, map[string]string{"app/app.cue": HealthyModule, "deploy.cue": Header + "\n" + body})
}

// Header opens a deploy.cue: the package, the catalog and the app module
// imported (as appmodule), every environment and release typed by the
// catalog. A test adds its environments and releases.
const Header = `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
`
