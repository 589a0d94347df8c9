package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/opmv2test"
)

// Upstream OPM v2 modules from a registry, released as an OPM user
// releases them today, through the CLI on the real API server: apply,
// a diff that finds nothing, a re-apply that changes nothing, a values
// change waited on until healthy, status, history, a rollback, a pull
// request that bumps two modules' pins reviewed against main (only those
// two move), the bump applied, and delete, which keeps the CRDs.
func TestV2ModulesLiveADay(t *testing.T) {
	// gotify's and jellystat's StatefulSets ask for Recreate, which the API
	// server refuses for a StatefulSet (below): published once more as
	// their authors would fix them, with RollingUpdate, which replaces a
	// single replica's pod only after the old one is gone.
	fixed := "rollingupdate"
	opmv2test.Registry(t,
		opmv2test.Patch{Dir: "gotify", Version: "2.1.1-" + fixed, File: "components.cue",
			Old: `updateStrategy: type: "Recreate"`, New: `updateStrategy: type: "RollingUpdate"`},
		opmv2test.Patch{Dir: "jellystat", Version: "2.0.2-" + fixed, File: "components.cue",
			Old: `updateStrategy: type: "Recreate"`, New: `updateStrategy: type: "RollingUpdate"`})
	ns := env.Namespace(t)
	mods := map[string]opmv2test.Module{}
	for _, m := range opmv2test.Modules(t) {
		mods[m.Dir] = m
	}
	// k8up carries CRDs; cert_manager would too, but its cluster-scoped
	// names are TestMigrateCertManagerChart's, on the same cluster.
	releases := map[string]string{"web-app": "web_app", "jellystat": "jellystat", "gotify": "gotify", "k8up": "k8up"}
	var deps, imports, rels strings.Builder
	for _, name := range slices.Sorted(maps.Keys(releases)) {
		m := mods[releases[name]]
		alias := strings.ReplaceAll(m.Dir, "_", "") + "mod"
		fmt.Fprintf(&deps, "\t%q: v: \"v%s\"\n", m.Path, m.Version)
		fmt.Fprintf(&imports, "\t%s %q\n", alias, m.Path)
		values := alias + ".debugValues"
		if name == "gotify" || name == "jellystat" {
			// Their HTTPRoutes need the Gateway API, which this plane lacks.
			values = fmt.Sprintf("{for k, v in %s.debugValues if k != \"httpRoute\" {(k): v}}", alias)
		}
		fmt.Fprintf(&rels, "releases: %q: {#module: %s, values: %s}\n", name, alias, values)
	}
	dir := deploytest.Write(t, map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: {\n" + deps.String() + "}\n",
		"deploy.cue": "package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n" + imports.String() + ")\n\n" +
			"environments: [Name=string]: core.#Environment & {metadata: name: Name}\n" +
			fmt.Sprintf("environments: test: {namespace: %q, namespaces: {clusterScoped: true, allowed: [%q, \"kube-system\", \"cert-manager\"]}, platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0-alpha.4\"}\n", ns, ns) +
			"releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" + rels.String(),
	})
	gitRepo(t, dir, "four upstream modules")
	kc := []string{"--env", "test", "--kubeconfig", env.Kubeconfig}

	// gotify and jellystat, as upstream renders them, are refused by the
	// API server: a StatefulSet of each asks for the Recreate update
	// strategy (a Deployment's), which the catalog's UpdateStrategy trait
	// allows. The server-side dry run finds it before anything is written.
	for _, name := range []string{"gotify", "jellystat"} {
		code, out, errOut := runOpm(t, append([]string{"apply", "--no-wait", dir, "-r", name}, kc...)...)
		assert.Equal(t, code, 2, "%s%s", out, errOut)
		assert.Check(t, is.Contains(errOut, `spec.updateStrategy: Invalid value: {"Type":"Recreate","RollingUpdate":null}: must be 'RollingUpdate' or 'OnDelete'`), errOut)
		assert.Check(t, is.Contains(errOut, "nothing was applied, nothing was pruned and the inventory was not written"))
		delete(releases, name)
	}
	applied := []string{"-r", "web-app", "-r", "k8up"}

	code, out, errOut := runOpm(t, append(append([]string{"apply", "--no-wait", dir}, applied...), kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	for name := range releases {
		assert.Check(t, is.Contains(out, "release "+name+" (environment test) applied"), out)
	}
	assert.Check(t, is.Contains(out, "customresourcedefinition.apiextensions.k8s.io/schedules.k8up.io created"), out)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	deps2, err := cs.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	assert.NilError(t, err)
	var names []string
	for _, d := range deps2.Items {
		names = append(names, d.Name)
		assert.Equal(t, d.Labels["app.kubernetes.io/managed-by"], "open-platform-model")
		assert.Assert(t, d.Labels["module-release.opmodel.dev/uuid"] != "")
	}
	assert.Check(t, slices.Contains(names, "web-app-web"), "%v", names)

	code, out, errOut = runOpm(t, append(append([]string{"diff", "--exit-code", dir}, applied...), kc...)...)
	assert.Equal(t, code, 0, "nothing differs right after apply\n%s%s", out, errOut)
	code, out, errOut = runOpm(t, append(append([]string{"apply", "--no-wait", dir}, applied...), kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	// The re-apply writes nothing: the fast path skips the release, or
	// (once the deployment controller has annotated its Deployments) the
	// full path finds every object unchanged.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "release ") {
			assert.Check(t, strings.Contains(line, "unchanged (inputs identical)") || strings.Contains(line, " 0 created, 0 configured,"), line)
			continue
		}
		assert.Check(t, strings.HasSuffix(line, " unchanged"), line)
	}

	// A values change moves one release only, and is waited on.
	code, out, errOut = runOpm(t, append([]string{"apply", dir, "-r", "web-app", "--timeout", "2m", "-f", deploytest.Values(t, "replicas: 3")}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "deployment.apps/web-app-web configured"), out)
	d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "web-app-web", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Equal(t, *d.Spec.Replicas, int32(3))

	code, out, errOut = runOpm(t, append([]string{"status", dir, "-r", "web-app", "-o", "json"}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	var st struct {
		Healthy  bool
		Releases []struct{ Name, ChangeID string }
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Check(t, st.Healthy, out)

	code, out, errOut = runOpm(t, append([]string{"history", "k8up", dir}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "k8up"))

	// Back to the first change of web-app, named as history shows it.
	changes := changesOf(t, "web-app", dir, kc...)
	assert.Equal(t, len(changes), 2)
	first := changes[1].ChangeID
	code, out, errOut = runOpm(t, append([]string{"rollback", "web-app", dir, "--to", first}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	d, err = cs.AppsV1().Deployments(ns).Get(t.Context(), "web-app-web", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Check(t, *d.Spec.Replicas != 3, "the rollback restores the first change's replicas, not %d", *d.Spec.Replicas)

	// A pull request bumps gotify's and jellystat's pins to the fixed
	// versions: reviewed against main, those two move (their StatefulSets'
	// update strategy), web-app and k8up are unchanged.
	gitIn(t, dir, "checkout", "-q", "-b", "fix-statefulsets")
	modFile := filepath.Join(dir, "cue.mod", "module.cue")
	mb, err := os.ReadFile(modFile)
	assert.NilError(t, err)
	bumped := strings.NewReplacer(`v: "v2.1.0"`, `v: "v2.1.1-`+fixed+`"`, `v: "v2.0.1"`, `v: "v2.0.2-`+fixed+`"`).Replace(string(mb))
	assert.Assert(t, strings.Count(bumped, fixed) == 2, "gotify v2.1.0 and jellystat v2.0.1 pinned in\n%s", mb)
	assert.NilError(t, os.WriteFile(modFile, []byte(bumped), 0o644))
	gitIn(t, dir, "commit", "-q", "-am", "gotify and jellystat: RollingUpdate")
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "--env", "test", "-o", "json")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	var rv struct {
		Releases []struct {
			Name    string
			Objects []struct{ Kind, Name, Change string }
			Counts  struct{ Modified int }
		}
		Unchanged []struct{ Release string }
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &rv), out)
	moved := map[string]int{}
	for _, r := range rv.Releases {
		moved[r.Name] = r.Counts.Modified
	}
	assert.Check(t, moved["gotify"] >= 1 && moved["jellystat"] >= 1, "%v\n%s", moved, out)
	for _, name := range []string{"web-app", "k8up"} {
		assert.Check(t, moved[name] == 0, "%s moved: %s", name, out)
	}
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "--env", "test", "-o", "markdown")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "RollingUpdate"), out)

	// Applied, the fixed modules are accepted and the others are left as
	// they are (their fingerprints did not move with the two pins; their
	// Deployments' revision annotations may still send them down the full
	// path, which finds every object unchanged).
	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	for _, name := range []string{"gotify", "jellystat"} {
		assert.Check(t, is.Contains(out, "release "+name+" (environment test) applied"), out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "release web-app ") || strings.HasPrefix(line, "release k8up ") {
			assert.Check(t, strings.Contains(line, "unchanged (inputs identical)") || strings.Contains(line, " 0 created, 0 configured,"), line)
		}
	}
	sts, err := cs.AppsV1().StatefulSets(ns).List(t.Context(), metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Check(t, len(sts.Items) >= 2, "gotify's and jellystat's StatefulSets: %d", len(sts.Items))
	applied = append(applied, "-r", "gotify", "-r", "jellystat")

	code, out, errOut = runOpm(t, append(append([]string{"delete", dir}, applied...), kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out+errOut, "CustomResourceDefinitions are pruned only with --prune-crds"), out+errOut)
	left, err := cs.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(left.Items), 0)
}

// A release of an OPM v2 module rolls out through a fleet as an
// older-line release does: production before staging ran the commit is
// refused by its gate (exit 8); the rollout applies staging, waits for it
// to be healthy, then production; status reads production healthy.
func TestV2FleetRollsOutThroughItsGates(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n" +
			"deps: {\n\t\"opmodel.dev/core@v2\": v: \"v2.0.0\"\n\t\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0\"\n}\n",
		// Healthy without controllers: a Service and a ConfigMap.
		"app/app.cue": `package app

import (
	c "opmodel.dev/core@v2"
	cat "opmodel.dev/catalogs/opm@v2"
)

c.#Module
metadata: {name: "app", modulePath: "test.example/deploy/app@v0", version: "1.0.0"}
#config: stamp: *"one" | string
debugValues: {}
#components: web: {
	c.#Component
	#resources: (cat.#ObjectsFQN): cat.#Objects
	spec: objects: [
		{apiVersion: "v1", kind: "Service", metadata: name: "web", spec: ports: [{port: 80, targetPort: 8080}]},
		{apiVersion: "v1", kind: "ConfigMap", metadata: name: "web-config", data: stamp: #config.stamp},
	]
}
`,
		"deploy.cue": deploytest.Header + fmt.Sprintf(`
environments: [_]: platform: registry: "opmodel.dev/catalogs/opm@v2": version: "2.0.0"
environments: stage: {namespace: "%[1]s-s", group: "staging"}
environments: prod: {namespace: "%[1]s-p", group: "production", rollout: {wave: 1, after: ["staging"]}}
releases: app: #module: appmodule
`, ns),
	})
	gitRepo(t, dir, "a v2 fleet")
	kc := "--kubeconfig=" + env.Kubeconfig

	code, _, errOut := runOpm(t, "apply", dir, "--env", "prod", kc)
	assert.Equal(t, code, 8, errOut)
	assert.Check(t, is.Contains(errOut, "may only get commit"))

	code, out, errOut := runOpm(t, "apply", dir, "--env", "staging,production", kc, "--timeout", "60s")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	for _, row := range [][]string{{"stage", "0", "staging", "-", "applied"}, {"prod", "1", "production", "-", "applied"}} {
		assert.Check(t, hasRow(out, row...), "%q not in\n%s", row, out)
	}
	code, out, errOut = runOpm(t, "status", dir, "--env", "production", kc, "-o", "json")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, `"healthy": true`), out)
}
