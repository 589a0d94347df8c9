//go:build bench

package bench

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/opmv2test"
)

// TestBenchRenderV2 times `opm render` of releases of upstream OPM's v2
// line — cert_manager (42 objects) and a generated module of 200 stateless
// web components (a Deployment and a Service each) — beside the older
// line's render of 200 components (four objects each), and prints the CPU
// (user+system) per object of each: a v2 render should cost no more.
func TestBenchRenderV2(t *testing.T) {
	opmv2test.Registry(t)
	work := t.TempDir()
	opm := buildOpm(t, work)
	var mods = map[string]opmv2test.Module{}
	for _, m := range opmv2test.Modules(t) {
		mods[m.Dir] = m
	}
	cm := mods["cert_manager"]
	certDir := v2BenchDeployment(t, fmt.Sprintf("%q: v: \"v%s\"", cm.Path, cm.Version),
		fmt.Sprintf("certmanagermod %q", cm.Path), `releases: "cert-manager": {#module: certmanagermod, values: certmanagermod.debugValues}`, nil)
	const n = 200
	manyDir := v2BenchDeployment(t, "\"opmodel.dev/core@v2\": v: \"v2.0.0-alpha.5\"\n\t\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0-alpha.4\"",
		"manymod \"test.example/deploy/many\"", `releases: many: #module: manymod`, map[string]string{"many/many.cue": manyComponents(n)})
	older := peerDeployment(t, filepath.Join(work, "older"), "bench", n, 0)

	cpu := func(objects int, args ...string) time.Duration {
		var cpus []time.Duration
		for range repeat {
			cmd := exec.Command(opm, args...)
			cmd.Env = os.Environ()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("opm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			if got := strings.Count("\n"+string(out), "\nkind: "); got < objects {
				t.Fatalf("opm %s rendered %d objects, want %d", strings.Join(args, " "), got, objects)
			}
			cpus = append(cpus, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		}
		slices.Sort(cpus)
		return cpus[len(cpus)/2] / time.Duration(objects)
	}
	certPer := cpu(42, "render", certDir, "--env", "test")
	manyPer := cpu(2*n, "render", manyDir, "--env", "test")
	olderPer := cpu(4*n, "render", older)
	fmt.Printf("bench render-v2 cert_manager cpu-per-object=%.2fms (42 objects)\n", float64(certPer.Microseconds())/1000)
	fmt.Printf("bench render-v2 components-%d cpu-per-object=%.2fms, older line components-%d cpu-per-object=%.2fms, ratio=%.2f (goal <= 1)\n",
		n, float64(manyPer.Microseconds())/1000, n, float64(olderPer.Microseconds())/1000, float64(manyPer)/float64(olderPer))
}

// v2BenchDeployment writes a deployment directory with the given deps,
// import, releases and extra files, its environment subscribed to
// catalogs/opm@v2 2.0.0-alpha.4.
func v2BenchDeployment(t *testing.T, deps, imports, releases string, files map[string]string) string {
	t.Helper()
	all := map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: {\n\t" + deps + "\n}\n",
		"deploy.cue": "package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n\t" + imports + "\n)\n\n" +
			"environments: [Name=string]: core.#Environment & {metadata: name: Name}\n" +
			"environments: test: {namespace: \"bench\", namespaces: {clusterScoped: true, allowed: [\"*\"]}, platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0-alpha.4\"}\n" +
			"releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" + releases + "\n",
	}
	maps.Copy(all, files)
	return deploytest.Write(t, all)
}

// manyComponents is a core@v2 module of n stateless web components, each
// a container exposed by a Service: a Deployment and a Service apiece.
func manyComponents(n int) string {
	var b strings.Builder
	b.WriteString(`package many

import (
	m "opmodel.dev/core@v2"
	bp "opmodel.dev/catalogs/opm/blueprints/v1beta1"
	res "opmodel.dev/catalogs/opm/resources/v1beta1"
	tr "opmodel.dev/catalogs/opm/traits/v1beta1"
)

m.#Module

metadata: {name: "many", modulePath: "test.example/deploy/many@v0", version: "0.1.0"}

#config: image: res.#Image & {repository: string | *"nginx", tag: string | *"1.27", digest: string | *""}
debugValues: {}

#components: {
`)
	for i := range n {
		fmt.Fprintf(&b, `	"web-%[1]d": {
		bp.#StatelessWorkload
		tr.#Expose
		spec: {
			statelessWorkload: {
				container: {name: "web-%[1]d", image: #config.image, ports: http: {name: "http", targetPort: 8080}}
				scaling: count: 1
				restartPolicy: "Always"
				updateStrategy: {type: "RollingUpdate", rollingUpdate: {}}
			}
			expose: {ports: http: statelessWorkload.container.ports.http & {exposedPort: 80}, type: "ClusterIP"}
		}
	}
`, i)
	}
	b.WriteString("}\n")
	return b.String()
}
