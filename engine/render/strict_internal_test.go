package render

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
)

const strictModuleFile = `module: "test.example/strict@v0"
language: version: "v0.12.0"
deps: "github.com/opmodel/pipeline/catalog@v0": v: "v0.1.0"
`

// strictComponents are, in testDeployment, a deployment with one component that embeds
// core.#Workload and MIXIN and sets spec.FIELD to BODY; BODY starts on
// line 12, so a mistake in its first line is reported there.
const strictComponents = `	#components: web: {
		core.#Workload
		MIXIN
		spec: workload: {type: "stateless", container: image: "nginx:1.27"}
		spec: FIELD: BODY
	}`

func strictDeployment() string { return testDeployment(`namespace: "staging"`, strictComponents) }

// strictLine is the line of `spec: FIELD: BODY` above.
const strictLine = 14

// TestEveryCatalogFieldMisspelledIsAnError is generated from the catalog's
// own schemas: for every field a catalog mixin's spec declares, down to
// two levels, the field misspelled by one edit is a validation error (exit
// 2) naming the field path, the line that set it, and the field meant.
func TestEveryCatalogFieldMisspelledIsAnError(t *testing.T) {
	root := t.TempDir()
	write := func(dir, name, content string) {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	probe := filepath.Join(root, "probe")
	write(probe, "cue.mod/module.cue", strictModuleFile)
	write(probe, "deploy.cue", strings.NewReplacer("MIXIN", "", "FIELD", "workload", "BODY", "{}").Replace(strictDeployment()))
	d, err := load.Load(t.Context(), probe)
	assert.NilError(t, err)

	owners := catalogOwners(d.Catalog)
	fields := make([]string, 0, len(owners))
	for f := range owners {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	assert.Assert(t, len(fields) >= 10, "the catalog's mixins: %v", owners)

	cases := 0
	for _, field := range fields {
		mixin := owners[field]
		schema := ownerSchema(t, d.Catalog, mixin, field)
		for _, path := range schemaPaths(schema, d.Catalog, nil, 3) {
			wrong := misspell(path[len(path)-1], fieldNames(lookupSchema(schema, path[:len(path)-1], d.Catalog), d.Catalog))
			if wrong == "" {
				continue
			}
			cases++
			name := field + "." + strings.Join(path, ".")
			t.Run(name, func(t *testing.T) {
				body := "{" + strings.Join(quoteAll(append(slices.Clone(path[:len(path)-1]), wrong)), ": ") + ": 1}"
				m := mixin
				if m == "core.#Workload" {
					m = ""
				}
				dir := filepath.Join(root, strings.ReplaceAll(name, "/", "_"))
				write(dir, "cue.mod/module.cue", strictModuleFile)
				write(dir, "deploy.cue", strings.NewReplacer("MIXIN", m, "FIELD", cue.Str(field).String(), "BODY", body).Replace(strictDeployment()))
				_, err := Render(t.Context(), Options{Dir: dir, Environment: "staging"})
				assert.Assert(t, err != nil, "spec.%s.%s: %s accepted", field, strings.Join(path[:len(path)-1], "."), wrong)
				assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
				want := strings.Join(append([]string{"spec", field}, append(slices.Clone(path[:len(path)-1]), wrong)...), ".")
				assert.Check(t, is.Contains(err.Error(), want+": field not allowed"))
				assert.Check(t, is.Contains(err.Error(), fmt.Sprintf("deploy.cue:%d:", strictLine)))
				assert.Check(t, is.Contains(err.Error(), fmt.Sprintf("%q", path[len(path)-1])), "suggests the field meant")
			})
		}
	}
	t.Logf("%d misspellings over %d spec fields", cases, len(fields))
	assert.Assert(t, cases >= 50)
}

// ownerSchema is the schema the mixin gives spec.field.
func ownerSchema(t *testing.T, catalog cue.Value, mixin, field string) cue.Value {
	t.Helper()
	v := catalog.LookupPath(cue.ParsePath(strings.TrimPrefix(mixin, "core.")))
	ss := specSchemas(v)[field]
	assert.Assert(t, len(ss) == 1, "%s declares spec.%s once", mixin, field)
	return ss[0]
}

// schemaPaths lists the declared fields of a struct schema, and of its
// struct-valued fields, down to depth levels. Pattern-constrained maps and
// lists are not descended into.
func schemaPaths(v, scope cue.Value, prefix []string, depth int) [][]string {
	if depth == 0 {
		return nil
	}
	var out [][]string
	seen := map[string]bool{}
	for name, fv := range schemaFields(v, scope) {
		if seen[name] {
			continue
		}
		seen[name] = true
		p := append(slices.Clone(prefix), name)
		out = append(out, p)
		out = append(out, schemaPaths(fv, scope, p, depth-1)...)
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	return out
}

// misspell drops one letter of name (the second to last, so it stays a
// plausible identifier), or "" when that collides with a sibling.
func misspell(name string, siblings []string) string {
	if len(name) < 3 {
		return ""
	}
	r := []rune(name)
	wrong := string(append(slices.Clone(r[:len(r)-2]), r[len(r)-1]))
	if slices.Contains(siblings, wrong) {
		return ""
	}
	return wrong
}

// The mistakes new users made (issue 27), each an error at their line.
func TestStrictComponentsCatchTheReportedMistakes(t *testing.T) {
	for name, c := range map[string]struct{ mixin, field, body, want string }{
		"tlsSecret for tlsSecretName": {"core.#Service\n\t\tcore.#Ingress", "ingress", `{host: "a.example", servicePort: 80, tlsSecret: "orders-tls"}`,
			`spec.ingress.tlsSecret: field not allowed; did you mean "tlsSecretName"?`},
		"envFrm for envFrom": {"", "workload", `{container: envFrm: [{configMap: "x"}]}`, `spec.workload.container.envFrm: field not allowed; did you mean "envFrom"?`},
		"Kubernetes-style envFrom": {"", "workload", `{container: envFrom: [{configMapRef: name: "x"}]}`,
			"spec.workload.container.envFrom.0.configMapRef: field not allowed; allowed: configMap, optional, prefix, secret"},
		"replicaz for replicas":    {"", "workload", `{replicaz: 2}`, `spec.workload.replicaz: field not allowed; did you mean "replicas"?`},
		"a field no one declares":  {"", "bogus", `1`, `spec.bogus: field not allowed: the component's definitions declare workload`},
		"disruptionBudget alone":   {"", "disruptionBudget", `{minAvailable: 1}`, "add the line `core.#DisruptionBudget` to the component"},
		"autoscaling alone":        {"", "autoscaling", `{maxReplicas: 3, cpu: 80}`, "add the line `core.#Autoscaling` to the component"},
		"minAvaliable, misspelled": {"core.#DisruptionBudget", "disruptionBudget", `{minAvaliable: 1}`, `spec.disruptionBudget.minAvaliable: field not allowed; did you mean "minAvailable"?`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			assert.NilError(t, os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755))
			assert.NilError(t, os.WriteFile(filepath.Join(dir, "cue.mod/module.cue"), []byte(strictModuleFile), 0o644))
			src := strings.NewReplacer("MIXIN", c.mixin, "FIELD", c.field, "BODY", c.body).Replace(strictDeployment())
			assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(src), 0o644))
			_, err := Render(t.Context(), Options{Dir: dir, Environment: "staging"})
			assert.Assert(t, err != nil, "accepted")
			assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
			assert.Check(t, is.Contains(err.Error(), c.want))
			line := strictLine
			if strings.Contains(c.mixin, "\n") {
				line++
			}
			assert.Check(t, is.Contains(err.Error(), fmt.Sprintf("deploy.cue:%d:", line)))
		})
	}
}

// refsComponents are two components, web and api; EDIT is spliced into web.
const refsComponents = `	#components: web: {
		core.#Workload
		core.#Service
		core.#Ingress
		core.#NetworkPolicy
		spec: workload: {type: "stateless", container: {image: "nginx:1.27", ports: http: containerPort: 8080}}
		spec: service: ports: web: {port: 80, targetPort: "http"}
		spec: ingress: {host: "web.example.com", servicePort: PORT}
		EDIT
	}
	#components: api: {
		core.#Workload
		core.#ServiceAccount
		spec: workload: {type: "stateless", container: image: "api:1"}
		spec: serviceAccount: {}
	}`

func refsDeployment() string { return testDeployment(`namespace: "staging"`, refsComponents) }

// refsLine is the line of EDIT above.
const refsLine = 18

// refsFile writes refsDeployment with edit and the Ingress's servicePort.
func refsFile(t *testing.T, edit, port string) string {
	t.Helper()
	dir := t.TempDir()
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "cue.mod/module.cue"), []byte(strictModuleFile), 0o644))
	src := strings.NewReplacer("EDIT", edit, "PORT", port).Replace(refsDeployment())
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(src), 0o644))
	return dir
}

// A reference that points nowhere inside the release is an error at the
// line that made it, with the name meant; one that may point outside it
// is a warning.
func TestReferencesAreChecked(t *testing.T) {
	for name, c := range map[string]struct{ edit, port, want string }{
		"networkPolicy to a component that does not exist": {`spec: networkPolicy: ingress: [{components: ["apy"]}]`, "80",
			`spec.networkPolicy.ingress.0.components.0: no component "apy" in this release, so the rule admits nothing; did you mean "api"?`},
		"probe on a port name no container has": {`spec: workload: container: probes: readiness: http: port: "htp"`, "80",
			`spec.workload.container.probes.readiness.http.port: no container port named "htp"; did you mean "http"?`},
		"Service targetPort name": {`spec: service: ports: admin: {port: 81, targetPort: "admn"}`, "80",
			`spec.service.ports.admin.targetPort: no container port named "admn"`},
		"Ingress servicePort the Service does not have": {"", "8080",
			`spec.ingress.servicePort: the Service has no port 8080; its ports: 80`},
		"volumeMount of an undeclared volume": {`spec: workload: {volumes: data: emptyDir: {}, container: volumeMounts: dat: mountPath: "/data"}`, "80",
			`spec.workload.container.volumeMounts.dat: mounts volume "dat", which spec.workload.volumes does not declare; did you mean "data"?`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(t.Context(), Options{Dir: refsFile(t, c.edit, c.port), Environment: "staging"})
			assert.Assert(t, err != nil, "accepted")
			assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
			assert.Check(t, is.Contains(err.Error(), c.want))
			line := refsLine
			if c.edit == "" {
				line = refsLine - 1
			}
			assert.Check(t, is.Contains(err.Error(), fmt.Sprintf("deploy.cue:%d:", line)))
		})
	}

	t.Run("serviceAccountName outside the release is a warning", func(t *testing.T) {
		rels, err := Render(t.Context(), Options{Dir: refsFile(t, "spec: workload: serviceAccountName: \"apii\"\n\t\tspec: networkPolicy: ingress: [{namespaces: [\"x\"]}]", "80"), Environment: "staging"})
		assert.NilError(t, err)
		assert.Equal(t, len(rels[0].Warnings), 1)
		assert.Check(t, is.Contains(rels[0].Warnings[0], `component web: spec.workload.serviceAccountName "apii" is no ServiceAccount of this release (api)`))
		assert.Check(t, is.Contains(rels[0].Warnings[0], `did you mean "api"?`))
	})

	t.Run("the untouched release renders", func(t *testing.T) {
		rels, err := Render(t.Context(), Options{Dir: refsFile(t, `spec: networkPolicy: ingress: [{components: ["api"]}, {namespaces: ["ingress-nginx"]}]`, "80"), Environment: "staging"})
		assert.NilError(t, err)
		assert.Equal(t, len(rels[0].Warnings), 0, "%v", rels[0].Warnings)
	})
}

// Settings that render and apply but defeat each other: warnings in the
// render (and so in review, the pull-request comment and apply), and the
// ServiceAccount default that makes rbac rules usable.
func TestCoherenceWarningsAndDefaults(t *testing.T) {
	render := func(t *testing.T, edit string) *Release {
		t.Helper()
		rels, err := Render(t.Context(), Options{Dir: refsFile(t, edit, "80"), Environment: "staging"})
		assert.NilError(t, err)
		return rels[0]
	}
	account := func(r *Release, name string) any {
		for _, res := range r.Resources {
			if res.Object.GetKind() == "ServiceAccount" && res.Object.GetName() == name {
				return res.Object.Object["automountServiceAccountToken"]
			}
		}
		return "missing"
	}
	t.Run("an Ingress behind a policy that admits only components", func(t *testing.T) {
		r := render(t, `spec: networkPolicy: ingress: [{components: ["api"]}]`)
		assert.Equal(t, len(r.Warnings), 1, "%v", r.Warnings)
		assert.Check(t, is.Contains(r.Warnings[0], "the ingress controller cannot reach it: add a rule {namespaces:"))
		r = render(t, `spec: networkPolicy: ingress: [{components: ["api"]}, {namespaces: ["ingress-nginx"]}]`)
		assert.Equal(t, len(r.Warnings), 0, "%v", r.Warnings)
	})
	t.Run("minAvailable not below replicas", func(t *testing.T) {
		r := render(t, "core.#DisruptionBudget\n\t\tspec: networkPolicy: ingress: [{namespaces: [\"x\"]}]\n\t\tspec: workload: replicas: 2\n\t\tspec: disruptionBudget: minAvailable: 2")
		assert.Equal(t, len(r.Warnings), 1, "%v", r.Warnings)
		assert.Check(t, is.Contains(r.Warnings[0], "minAvailable 2 is not below its 2 replica(s)"))
	})
	t.Run("a ServiceAccount with rbac rules mounts its token", func(t *testing.T) {
		r := render(t, "spec: networkPolicy: ingress: [{namespaces: [\"x\"]}]")
		assert.Equal(t, account(r, "api"), false, "no rbac: no token")
		// api with rules: the token is mounted, unless said otherwise (a warning).
		dir := refsFile(t, "spec: networkPolicy: ingress: [{namespaces: [\"x\"]}]", "80")
		src, err := os.ReadFile(filepath.Join(dir, "deploy.cue"))
		assert.NilError(t, err)
		withRBAC := strings.Replace(string(src), "\t\tspec: serviceAccount: {}", "\t\tcore.#RBAC\n\t\tspec: serviceAccount: {}\n\t\tspec: rbac: rules: [{resources: [\"configmaps\"], verbs: [\"get\"]}]", 1)
		assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(withRBAC), 0o644))
		rels, err := Render(t.Context(), Options{Dir: dir, Environment: "staging"})
		assert.NilError(t, err)
		assert.Equal(t, account(rels[0], "api"), true)
		assert.Equal(t, len(rels[0].Warnings), 0, "%v", rels[0].Warnings)

		off := strings.Replace(withRBAC, "spec: serviceAccount: {}", "spec: serviceAccount: automountToken: false", 1)
		assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(off), 0o644))
		rels, err = Render(t.Context(), Options{Dir: dir, Environment: "staging"})
		assert.NilError(t, err)
		assert.Equal(t, account(rels[0], "api"), false)
		assert.Equal(t, len(rels[0].Warnings), 1, "%v", rels[0].Warnings)
		assert.Check(t, is.Contains(rels[0].Warnings[0], "cannot use them"))
	})
}

// testDeployment is a deploy.cue with one environment, staging (envFields
// added to it), and one release, app, whose module declares components;
// components start on line 10, so tests can name the line of a mistake.
func testDeployment(envFields, components string) string {
	return `package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

environments: staging: core.#Environment & {metadata: name: "staging", ` + envFields + `}
releases: app: core.#ModuleRelease & {metadata: name: "app", #module: {
	core.#Module
	metadata: {apiVersion: "test.example/strict/app@v0", name: "app", version: "0.1.0"}
	#config: {}
` + components + `
}}
`
}

// quoteAll quotes each label as CUE writes a field name.
func quoteAll(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = cue.Str(l).String()
	}
	return out
}
