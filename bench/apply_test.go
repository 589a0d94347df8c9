//go:build bench

package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/kubetest"
)

// components × 4 objects (Deployment, Service, ConfigMap, Secret).
const components = 50

// changedObjects is how many objects a change of the rev value touches
// (the ConfigMap and Secret of the first tenth of the components): 10%.
const changedObjects = 4 * components / 10

// kubectl is the peer; KUBECTL overrides where it is.
func kubectl() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	return "/usr/bin/kubectl"
}

func TestBenchApply200(t *testing.T) {
	env, err := kubetest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	work := t.TempDir()
	opm := filepath.Join(work, "opm")
	build := exec.Command("go", "build", "-o", opm, "github.com/opmodel/pipeline/cmd/opm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build opm: %v\n%s", err, out)
	}

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"bench-opm", "bench-kubectl"} {
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	opmDir := deployment(t, filepath.Join(work, "opm-deploy"), "bench-opm")
	kubectlDir := deployment(t, filepath.Join(work, "kubectl-deploy"), "bench-kubectl")

	// The same manifests for kubectl, in its own namespace.
	manifests := filepath.Join(work, "manifests.yaml")
	out := run(t, opm, "render", kubectlDir)
	if n := strings.Count(string(out), "\n---\n") + 1; n != 4*components {
		t.Fatalf("rendered %d objects, want %d", n, 4*components)
	}
	if err := os.WriteFile(manifests, out, 0o644); err != nil {
		t.Fatal(err)
	}
	kc := env.Kubeconfig
	// Warm kubectl's discovery cache: its normal state, and kinder to it.
	home := filepath.Join(work, "home")
	run(t, kubectl(), "--kubeconfig", kc, "--cache-dir", filepath.Join(home, "cache"), "api-resources")

	kubectlApply := func() time.Duration {
		return timed(t, kubectl(), "--kubeconfig", kc, "--cache-dir", filepath.Join(home, "cache"), "apply", "--server-side", "-f", manifests)
	}
	opmApply := func(want string) time.Duration {
		start := time.Now()
		// No health wait: kubectl apply does not wait either (and the
		// bench's image is one the simulated nodes never pull).
		out := run(t, opm, "apply", "--no-wait", opmDir, "--kubeconfig", kc)
		d := time.Since(start)
		if !strings.Contains(string(out), want) {
			t.Fatalf("opm apply did not report %q:\n%s", want, lastLine(out))
		}
		return d
	}

	// A fresh apply happens once; every other case is the median of
	// `repeat` runs, since one sample on a shared 2-core machine is noise.
	opmFresh := opmApply(fmt.Sprintf("%d created, 0 configured, 0 unchanged", 4*components))
	kubectlFresh := kubectlApply()
	opmAgain := median(func() time.Duration {
		return opmApply(fmt.Sprintf("0 created, 0 configured, %d unchanged", 4*components))
	})
	kubectlAgain := median(kubectlApply)

	report("apply-200", opmFresh, kubectlFresh)
	report("reapply-200", opmAgain, kubectlAgain)

	// Diff with 10% of the objects changed, then status, on the same state.
	rev := filepath.Join(work, "rev.cue")
	if err := os.WriteFile(rev, []byte("rev: \"2\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(work, "changed.yaml")
	if err := os.WriteFile(changed, run(t, opm, "render", kubectlDir, "-f", rev), 0o644); err != nil {
		t.Fatal(err)
	}
	opmDiff := median(func() time.Duration {
		start := time.Now()
		out := run(t, opm, "diff", opmDir, "-f", rev, "--kubeconfig", kc)
		d := time.Since(start)
		if want := fmt.Sprintf("%d modified, %d unchanged, 0 stale, 0 ghost", changedObjects, 4*components-changedObjects); !strings.Contains(string(out), want) {
			t.Fatalf("opm diff did not report %q:\n%s", want, lastLine(out))
		}
		return d
	})
	kubectlDiff := median(func() time.Duration {
		start := time.Now()
		out := runExit(t, 1, kubectl(), "--kubeconfig", kc, "--cache-dir", filepath.Join(home, "cache"), "diff", "--server-side", "-f", changed)
		d := time.Since(start)
		if n := strings.Count(string(out), "\ndiff -u "); n+1 != changedObjects && n != changedObjects {
			t.Fatalf("kubectl diff showed %d objects, want %d", n, changedObjects)
		}
		return d
	})
	report("diff-200", opmDiff, kubectlDiff)

	opmStatus := median(func() time.Duration {
		start := time.Now()
		// The image never pulls, so the Deployments stay InProgress and
		// every run judges the same state.
		out := runExit(t, 1, opm, "status", opmDir, "--kubeconfig", kc)
		d := time.Since(start)
		if !strings.Contains(string(out), "Discovery:   inventory") {
			t.Fatalf("opm status did not use the inventory:\n%s", out)
		}
		return d
	})
	kubectlStatus := median(func() time.Duration {
		return timed(t, kubectl(), "--kubeconfig", kc, "--cache-dir", filepath.Join(home, "cache"), "get", "-f", manifests)
	})
	report("status-200", opmStatus, kubectlStatus)

	reportDiscovery(t, env, "bench-opm")
}

// repeat is how many runs a repeatable case's median is taken over.
const repeat = 3

func median(run func() time.Duration) time.Duration {
	ds := make([]time.Duration, repeat)
	for i := range ds {
		ds[i] = run()
	}
	slices.Sort(ds)
	return ds[repeat/2]
}

// medianPair runs a and b alternately, repeat times each, and returns
// each one's median: drift in the machine's load then falls on both sides
// alike instead of on whichever ran second.
func medianPair(a, b func() time.Duration) (time.Duration, time.Duration) {
	as, bs := make([]time.Duration, repeat), make([]time.Duration, repeat)
	for i := range repeat {
		as[i], bs[i] = a(), b()
	}
	slices.Sort(as)
	slices.Sort(bs)
	return as[repeat/2], bs[repeat/2]
}

func report(name string, opm, kubectl time.Duration) {
	ratio := opm.Seconds() / kubectl.Seconds()
	fmt.Printf("bench %s opm=%.2fs kubectl=%.2fs ratio=%.2f%s\n", name, opm.Seconds(), kubectl.Seconds(), ratio, verdict(name, ratio))
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// runExit is run for a command that must exit with code want (kubectl
// diff exits 1 when there are differences).
func runExit(t *testing.T, want int, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != want {
		t.Fatalf("%s %s: exit code %d (%v), want %d\n%s", name, strings.Join(args, " "), code, err, want, stderr.String())
	}
	return stdout.Bytes()
}

func timed(t *testing.T, name string, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	run(t, name, args...)
	return time.Since(start)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// deployment writes a deployment directory with one release, "bench", of
// a module with `components` components, each a Deployment, a Service, a
// ConfigMap and a Secret.
func deployment(t *testing.T, dir, namespace string) string {
	return deploymentN(t, dir, namespace, components)
}

func deploymentN(t *testing.T, dir, namespace string, components int) string {
	var mod strings.Builder
	mod.WriteString(`package mod

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "example.com/bench/mod@v0", name: "bench", version: "0.1.0"}

#config: {
	image: *"registry.invalid/bench/nginx:1.27" | string
	rev:   *"1" | string
}

#components: {
`)
	for i := range components {
		rev := ""
		if i < changedObjects/2 {
			rev = ", rev: #config.rev"
		}
		fmt.Fprintf(&mod, `	c%02[1]d: {
		core.#Workload
		core.#Service
		core.#Configs
		core.#Secrets
		spec: {
			workload: {type: "stateless", replicas: 1, container: {image: #config.image, ports: http: containerPort: 8080}}
			service: ports: http: {port: 80, targetPort: 8080}
			configs: "c%02[1]d-config": data: {key: "value-%[1]d"%[2]s}
			secrets: "c%02[1]d-secret": data: {password: "pw-%[1]d"%[2]s}
		}
	}
`, i, rev)
	}
	mod.WriteString("}\n")
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/bench@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: \"github.com/opmodel/pipeline/catalog@v0\": v: \"v0.1.0\"\n",
		"mod/mod.cue":        mod.String(),
		"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	m "example.com/bench/mod"
)

releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: bench: {
	#module: m
	metadata: namespace: %q
	values: {}
}
`, namespace),
	}
	for name, content := range files {
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
