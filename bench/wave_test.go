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

// TestBenchWave times one wave of three environments, each on a control
// plane of its own, against one environment's apply of the same 200-object
// release: the environments of a wave apply in parallel, so the wave
// should cost little more than one, not three.
//
//	bench wave-3x200 opm=<s>s single=<s>s ratio=<wave/single> sequential=<s>s ratio-to-sequential=<wave/sequential> cpu=<s>s single-cpu=<s>s
//	bench rewave-3x200 …   (again, nothing changed; medians)
//
// "sequential" is the three environments applied one after the other (the
// hand-written workflow a wave replaces); cpu is opm's own CPU time.
func TestBenchWave(t *testing.T) {
	var planes []*kubetest.Env
	for range 3 {
		p, err := kubetest.Start()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Stop() }()
		planes = append(planes, p)
	}
	work := t.TempDir()
	opm := buildOpm(t, work)
	dir := deployment(t, filepath.Join(work, "deploy"), "unused")
	var envs strings.Builder
	envs.WriteString(`package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

environments: [Name=string]: core.#Environment & {metadata: name: Name}
`)
	fmt.Fprintf(&envs, "environments: solo: {namespace: \"bench-solo\", cluster: kubeConfig: %q}\n", planes[0].Kubeconfig)
	for i, p := range planes {
		fmt.Fprintf(&envs, "environments: \"w%d\": {namespace: \"bench-wave\", group: \"fleet\", cluster: kubeConfig: %q}\n", i, p.Kubeconfig)
		// The same three, applied one after the other for comparison.
		fmt.Fprintf(&envs, "environments: \"s%d\": {namespace: \"bench-seq\", cluster: kubeConfig: %q}\n", i, p.Kubeconfig)
	}
	// The release's namespace comes from its environment.
	deploy := filepath.Join(dir, "deploy.cue")
	b, err := os.ReadFile(deploy)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "\tmetadata: namespace: \"unused\"\n", "", 1))
	if err := os.WriteFile(deploy, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "environments.cue"), []byte(envs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, p := range planes {
		cs, err := kubernetes.NewForConfig(p.Config)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"bench-wave", "bench-seq"}
		if i == 0 {
			names = append(names, "bench-solo")
		}
		for _, ns := range names {
			if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// apply returns the wall time and opm's own CPU time (user + system):
	// on this 2-core machine the three planes share the cores with opm, so
	// CPU shows what opm itself spends per environment.
	apply := func(args ...string) (wall, cpu time.Duration) {
		cmd := exec.Command(opm, append([]string{"apply", dir}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("opm apply %v: %v\n%s", args, err, lastLines(out.Bytes(), 20))
		}
		wall = time.Since(start)
		if args[0] == "--group" && strings.Count(out.String(), "applied  bench=") != 3 {
			t.Fatalf("the wave did not apply three environments:\n%s", lastLines(out.Bytes(), 8))
		}
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	sequential := func() (wall, cpu time.Duration) {
		for _, e := range []string{"s0", "s1", "s2"} {
			w, c := apply("--env", e, "--no-wait")
			wall, cpu = wall+w, cpu+c
		}
		return wall, cpu
	}
	line := func(name string, wave, waveCPU, single, singleCPU, seq time.Duration) {
		fmt.Printf("bench %s opm=%.2fs single=%.2fs ratio=%.2f sequential=%.2fs ratio-to-sequential=%.2f cpu=%.2fs single-cpu=%.2fs\n",
			name, wave.Seconds(), single.Seconds(), wave.Seconds()/single.Seconds(), seq.Seconds(), wave.Seconds()/seq.Seconds(), waveCPU.Seconds(), singleCPU.Seconds())
	}
	single, singleCPU := apply("--env", "solo", "--no-wait")
	wave, waveCPU := apply("--group", "fleet", "--no-wait")
	seq, _ := sequential()
	line("wave-3x200", wave, waveCPU, single, singleCPU, seq)
	var waves, singles, seqs, waveCPUs, singleCPUs []time.Duration
	for range repeat {
		w, wc := apply("--group", "fleet", "--no-wait")
		s1, sc := apply("--env", "solo", "--no-wait")
		q, _ := sequential()
		waves, singles, seqs, waveCPUs, singleCPUs = append(waves, w), append(singles, s1), append(seqs, q), append(waveCPUs, wc), append(singleCPUs, sc)
	}
	line("rewave-3x200", mid(waves), mid(waveCPUs), mid(singles), mid(singleCPUs), mid(seqs))
	apis, etcds := rssOf("kube-apiserver"), rssOf("etcd")
	fmt.Printf("bench planes-3 kube-apiserver=%dMiB etcd=%dMiB per-plane=%dMiB (resident, after the runs)\n", apis>>20, etcds>>20, (apis+etcds)/3>>20)
}

// rssOf sums the resident memory of every process called name.
func rssOf(name string) int64 {
	var total int64
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				total += kb << 10
			}
		}
	}
	return total
}

func mid(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
