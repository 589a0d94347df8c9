// Package scaffold writes a new deployment directory, or a new module in
// one, that renders, reviews and applies as written (opm init), as `helm
// create` and `timoni mod init` start a chart or a module. It never
// overwrites a file: what exists stays, and the error says what to do.
package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// DeploymentOptions are the options of Deployment.
type DeploymentOptions struct {
	// Dir is the deployment directory to create (or an empty one).
	Dir string
	// Module names the first module and its release; "hello" when empty.
	Module string
	// ModulePath is the CUE module path of the deployment directory;
	// "example.com/deploy" when empty. Import paths of its modules start
	// with it.
	ModulePath string
}

// moduleName is what a module, a release and a CUE package may be called
// alike: a DNS label that is also a CUE identifier.
var moduleName = regexp.MustCompile(`^[a-z][a-z0-9]{0,30}$`)

// modulePath is a CUE module path without a major version suffix.
var modulePath = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*(/[a-zA-Z0-9._~-]+)*$`)

// Deployment writes a deployment directory: cue.mod/module.cue, deploy.cue
// (two environments, staging and production after it, and one release)
// and modules/<module>/<module>.cue. It returns the files written,
// relative to Dir.
func Deployment(opts DeploymentOptions) ([]string, error) {
	opts.Module = cmpOr(opts.Module, "hello")
	opts.ModulePath = strings.TrimSuffix(cmpOr(opts.ModulePath, "example.com/deploy"), "@v0")
	if err := checkName(opts.Module); err != nil {
		return nil, err
	}
	if !modulePath.MatchString(opts.ModulePath) {
		return nil, fmt.Errorf("--module-path %q is not a CUE module path: use a domain and path, such as example.com/deploy", opts.ModulePath)
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, "cue.mod", "module.cue")); err == nil {
		return nil, fmt.Errorf("%s is a deployment directory already (it has cue.mod/module.cue); to add a module to it: opm init module NAME %s", opts.Dir, opts.Dir)
	}
	data := templateData{Name: opts.Module, ModulePath: opts.ModulePath}
	files := []file{
		{"cue.mod/module.cue", moduleFile},
		{"deploy.cue", deployFile},
		{filepath.Join("modules", opts.Module, opts.Module+".cue"), moduleTemplate},
	}
	return write(opts.Dir, files, data)
}

// Module adds modules/<name>/<name>.cue to the deployment directory dir,
// and returns the file written (relative to dir) and the lines that deploy
// it as a release.
func Module(dir, name string) (written []string, howTo string, err error) {
	if err := checkName(name); err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cue.mod", "module.cue"))
	if err != nil {
		return nil, "", fmt.Errorf("%s is not a deployment directory (no cue.mod/module.cue): start one with opm init %s, or name the directory that holds cue.mod/", dir, dir)
	}
	path := modulePathOf(b)
	if path == "" {
		return nil, "", fmt.Errorf("%s/cue.mod/module.cue declares no module path (a line module: \"example.com/deploy@v0\")", dir)
	}
	data := templateData{Name: name, ModulePath: path}
	written, err = write(dir, []file{{filepath.Join("modules", name, name+".cue"), moduleTemplate}}, data)
	if err != nil {
		return nil, "", err
	}
	howTo = fmt.Sprintf("to deploy it, import it in deploy.cue and add a release:\n\n"+
		"  import %smod \"%s/modules/%s\"\n\n"+
		"  releases: %s: {\n  \t#module: %smod\n  \tvalues: image: \"nginxinc/nginx-unprivileged:1.27\"\n  }\n", name, path, name, name, name)
	return written, howTo, nil
}

func checkName(name string) error {
	if !moduleName.MatchString(name) {
		return fmt.Errorf("module name %q: use lower-case letters and digits, starting with a letter, at most 31 (it names the module, its release, its CUE package and its objects)", name)
	}
	return nil
}

// moduleLine is cue.mod/module.cue's module path line.
var moduleLine = regexp.MustCompile(`(?m)^module:\s*"([^"@]+)(@v\d+)?"`)

// modulePathOf reads the module path out of cue.mod/module.cue, without
// its major version suffix.
func modulePathOf(b []byte) string {
	m := moduleLine.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

type templateData struct{ Name, ModulePath string }

type file struct{ path, text string }

// write renders every file, then writes them, refusing before writing
// anything when one exists already.
func write(dir string, files []file, data templateData) ([]string, error) {
	rendered := make([][]byte, len(files))
	for i, f := range files {
		p := filepath.Join(dir, f.path)
		if _, err := os.Stat(p); err == nil {
			return nil, fmt.Errorf("%s exists already: opm init writes only new files; move it away or choose another name", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checking %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := template.Must(template.New(f.path).Parse(f.text)).Execute(&b, data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
		rendered[i] = b.Bytes()
	}
	var out []string
	for i, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return out, fmt.Errorf("creating %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, rendered[i], 0o644); err != nil {
			return out, fmt.Errorf("writing %s: %w", p, err)
		}
		out = append(out, f.path)
	}
	return out, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

const moduleFile = `// The deployment directory is a CUE module: its path prefixes the import
// paths of its own modules, its language version is the CUE it is written
// in, and it depends on OPM's catalog (built into opm: nothing to fetch).
module: "{{.ModulePath}}@v0"
language: version: "v0.12.0"
deps: "github.com/opmodel/pipeline/catalog@v0": v: "v0.1.0"
`

const deployFile = `// The deployment directory: which environments exist and which releases
// are deployed to them.
//
//	opm render . --env staging     what would be applied, as YAML
//	opm apply . --env staging      apply it, and wait until it is healthy
package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	{{.Name}}mod "{{.ModulePath}}/modules/{{.Name}}"
)

// Every environment and every release is one of the catalog's; a release
// is named after its key unless it says otherwise.
environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

// staging deploys to the cluster your kubeconfig points at, into its own
// namespace (apply creates it).
environments: staging: {
	namespace: "{{.Name}}-staging"
	values: replicas: 1
}

// production pins its kubeconfig context, so it is never applied to the
// cluster you happen to point at, and follows staging: opm apply refuses it
// until staging runs the same git commit, healthy.
environments: production: {
	cluster: kubeContext: "production"
	namespace: "{{.Name}}"
	rollout: after: ["staging"]
	values: replicas: 2
}

// The release of your module: its values, then each environment's values,
// then any -f values file (the environment wins over the release).
releases: {{.Name}}: {
	#module: {{.Name}}mod
	values: image: "nginxinc/nginx-unprivileged:1.27"
}
`

const moduleTemplate = `// Package {{.Name}} is a module: what a release of it renders. #config says
// which values a release and its environments may set; #components says
// which objects those values become. The catalog's definitions (core.#…)
// render each component's Kubernetes objects.
package {{.Name}}

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion:  "{{.ModulePath}}/modules/{{.Name}}@v0"
	name:        "{{.Name}}"
	version:     "0.1.0"
	description: "A web server"
}

// The values. "!" marks one a release must set; "*x | T" is a default x of
// type T, and "& >=1" a constraint: a wrong value is an error at its line.
#config: {
	// The container image to run.
	image!: string
	// How many pods run it.
	replicas: *1 | int & >=1
	// The port the container listens on.
	port: *8080 | int & >0 & <65536
}

#components: {
	// One component: a Deployment (core.#Workload, type "stateless") and a
	// Service in front of it (core.#Service). Pods run under the restricted
	// Pod Security Standard (non-root, no privilege escalation, the runtime's
	// seccomp profile) unless the workload's securityContext relaxes it.
	web: {
		core.#Workload
		core.#Service
		spec: {
			workload: {
				type:     "stateless"
				replicas: #config.replicas
				container: {
					image: #config.image
					ports: http: containerPort: #config.port
					resources: requests: {cpu: "50m", memory: "64Mi"}
				}
			}
			service: ports: http: {port: 80, targetPort: #config.port}
		}
	}
}
`
