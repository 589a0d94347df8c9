package deploytest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The attacker's fixture: one canary secret and one 4-digit PIN that flow
// into a Secret, a ConfigMap (a DSN that URL-encodes the canary, its
// base64 and upper-case copies), a sha256 checksum annotation, an object
// name (cfg-<PIN>) and a value under a dotted key
// (spring.datasource.password). Whoever reads the outputs knows all of
// this but the two values.
const (
	AttackCanary = "cnry-Q7f9Xk2LmP4vT8wZ"
	AttackPIN    = "0815"
	// The values a rotation brings.
	AttackCanary2 = "cnry-Z3b8Rk5NnW1yU6aJ"
	AttackPIN2    = "2931"
)

// AttackModule is the module that carries the secrets everywhere.
const AttackModule = `package attack

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net"
	"strings"

	core "github.com/opmodel/pipeline/catalog@v0"
)

core.#Module

metadata: {
	apiVersion: "test.example/deploy/attack@v0"
	name:       "attack"
	version:    "1.0.0"
}

#config: {
	canary!: string
	pin!:    string & =~"^[0-9]{4}$"
	"spring.datasource.password"!: string
	// A public value under the dotted key's first label: "spring.x.y"
	// and spring: x: y are different paths.
	spring: datasource: url: *"jdbc:postgresql://db:5432/app" | string
	replicas: *1 | int
	// Public notes: decoys that may equal the PIN's text.
	notes: [string]: string
}

#components: attack: {
	core.#Objects
	spec: objects: [{
		apiVersion: "v1"
		kind:       "Secret"
		metadata: name: "attack-creds"
		type: "Opaque"
		stringData: {
			canary: #config.canary
			pin:    #config.pin
			"spring.datasource.password": #config["spring.datasource.password"]
		}
	}, {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {
			name: "attack-config"
			annotations: "checksum/secret": hex.Encode(sha256.Sum256(#config.canary + #config.pin))
		}
		data: {
			dsn:      "postgres://app:\(net.QueryEscape(#config.canary))@db:5432/app"
			upper:    strings.ToUpper(#config.canary)
			encoded:  base64.Encode(null, #config.canary)
			jdbc:     #config.spring.datasource.url
			replicas: "\(#config.replicas)"
			for k, v in #config.notes {"note-\(k)": v}
		}
	}, {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: "cfg-\(#config.pin)"
		data: purpose: "named after the PIN"
	}]
}
`

// PinModule holds the PIN alone (every other input is public), in a
// Secret, a checksum annotation and a name: from its published digest,
// change ID or checksum, a reader would confirm the PIN in 10 000 tries
// unless they are sealed.
const PinModule = `package pin

import (
	"crypto/sha256"
	"encoding/hex"

	core "github.com/opmodel/pipeline/catalog@v0"
)

core.#Module

metadata: {
	apiVersion: "test.example/deploy/pin@v0"
	name:       "pin"
	version:    "1.0.0"
}

#config: {
	pin!: string & =~"^[0-9]{4}$"
	// The environment's values reach every release; this one reads only pin.
	canary?: string
	"spring.datasource.password"?: string
}

#components: pin: {
	core.#Objects
	spec: objects: [{
		apiVersion: "v1"
		kind:       "Secret"
		metadata: name: "pin-creds"
		type: "Opaque"
		stringData: pin: #config.pin
	}, {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {
			name: "pin-config"
			annotations: "checksum/pin": hex.Encode(sha256.Sum256(#config.pin))
		}
		data: purpose: "rolls when the PIN changes"
	}, {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: "pin-\(#config.pin)"
		data: purpose: "named after the PIN"
	}]
}
`

// AttackSource is where the fixture's secrets come from.
type AttackSource string

const (
	// AttackSOPS: a SOPS-encrypted values file the environment declares.
	AttackSOPS AttackSource = "sops"
	// AttackRepo: the release's own values, kept only in a Secret.
	AttackRepo AttackSource = "repo"
	// AttackInput: an in-memory secret input (the Action's values-secret,
	// Dagger's valuesSecret); the directory holds none of them.
	AttackInput AttackSource = "input"
	// AttackSOPSV2: as AttackSOPS, the modules written for OPM's v2 line
	// (V2Core, V2Catalog's objects resource; publish V2Modules()), on a
	// platform both environments subscribe to.
	AttackSOPSV2 AttackSource = "sops-v2"
)

// AttackV2 rewrites the attack fixture's modules (written for this
// project's catalog) for OPM's v2 line: the same objects, from a core@v2
// module whose one component holds them as an objects resource.
func AttackV2(files map[string]string) map[string]string {
	module := strings.NewReplacer(
		"\tcore \"github.com/opmodel/pipeline/catalog@v0\"", "\tc \"opmodel.dev/core@v2\"\n\tcat \"opmodel.dev/catalogs/opm@v2\"",
		"core.#Module", "c.#Module\ndebugValues: {}",
		"apiVersion: \"test.example/deploy/", "modulePath: \"test.example/deploy/",
		"core.#Objects", "c.#Component\n\t#resources: (cat.#ObjectsFQN): cat.#Objects",
	)
	for _, f := range []string{"attack/attack.cue", "pin/pin.cue"} {
		files[f] = module.Replace(files[f])
	}
	files["cue.mod/module.cue"] = "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n" +
		"deps: {\n\t\"opmodel.dev/core@v2\": v: \"v2.0.0\"\n\t\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0\"\n}\n"
	files["deploy.cue"] += "\nenvironments: [_]: platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0\"\n"
	return files
}

// AttackValues is the secret values as YAML.
func AttackValues(canary, pin string) string {
	return fmt.Sprintf("canary: %s\npin: %q\nspring.datasource.password: %s-db\n", canary, pin, canary)
}

// AttackDir writes a deployment directory with environment "production"
// (namespace ns) and releases "attack" and "pin", their secrets (canary
// and PIN) from source.
func AttackDir(t testing.TB, namespace string, source AttackSource, canary, pin string) string {
	t.Helper()
	return Write(t, AttackFiles(t, namespace, source, canary, pin))
}

// AttackFiles are AttackDir's files, for rewriting a directory in place (a
// rotation committed on a branch).
func AttackFiles(t testing.TB, namespace string, source AttackSource, canary, pin string) map[string]string {
	t.Helper()
	files := map[string]string{"attack/attack.cue": AttackModule, "pin/pin.cue": PinModule}
	env, values, pinValues := "", "", ""
	switch source {
	case AttackSOPS, AttackSOPSV2:
		b, err := os.ReadFile(SopsValues(t, AttackValues(canary, pin)))
		if err != nil {
			t.Fatal(err)
		}
		files["secrets/production.sops.yaml"] = string(b)
		env = `valuesFiles: ["secrets/production.sops.yaml"]`
	case AttackRepo:
		values = fmt.Sprintf("canary: %q, pin: %q, \"spring.datasource.password\": %q", canary, pin, canary+"-db")
		pinValues = fmt.Sprintf("pin: %q", pin)
	default:
		env = `valuesFiles: []`
	}
	files["deploy.cue"] = fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	attackmod "test.example/deploy/attack"
	pinmod "test.example/deploy/pin"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: production: {
	namespace: %q
	%s
}

// Never applied: what `+"`opm rbac`"+` would grant its deployer.
environments: audit: {
	namespace: environments.production.namespace
	cluster: impersonate: serviceAccount: "\(namespace)/deployer"
	valuesFiles: environments.production.valuesFiles
}

releases: attack: {
	#module: attackmod
	values: {%s}
}

releases: pin: {
	#module: pinmod
	values: {%s}
}
`, namespace, env, values, pinValues)
	if source == AttackSOPSV2 {
		return AttackV2(files)
	}
	return files
}
