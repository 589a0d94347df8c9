//go:build bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/opmodel/pipeline/engine/render"
)

// TestBenchRenderProfile renders the 1 000-object release of TestBenchPeers
// (250 components: Deployment, ConfigMap, Secret, Service or ConfigMap)
// with and without Secrets that read a release value, then the first in
// this process under the CPU and allocation profilers, and prints the
// functions that take the most time and memory, cumulatively. The profiles
// are left in $OPM_PROFILE_DIR when it is set, for `go tool pprof`.
// docs/performance.md explains a run of it.
func TestBenchRenderProfile(t *testing.T) {
	work := t.TempDir()
	out := os.Getenv("OPM_PROFILE_DIR")
	if out == "" {
		out = work
	}
	// The ConfigMap and Secret of the first 50 components read a value
	// of the release, as in TestBenchPeers' diff: the Secrets make the
	// render trace where that value goes (engine/taint). The same release
	// with no Secret reading a value shows what that tracing costs.
	dir := peerDeployment(t, filepath.Join(work, "traced"), "bench", 250, 50)
	plain := peerDeployment(t, filepath.Join(work, "plain"), "bench", 250, 0)
	renderIn := func(dir string) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			if _, err := render.Render(t.Context(), render.Options{Dir: dir, Releases: []string{"bench"}}); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
	}
	renderOnce := renderIn(dir)
	tracedTime, plainTime := medianPair(renderOnce, renderIn(plain))
	fmt.Printf("bench render-1000-secret-tracing traced=%.2fs plain=%.2fs ratio=%.2f\n", tracedTime.Seconds(), plainTime.Seconds(), tracedTime.Seconds()/plainTime.Seconds())
	cpu := filepath.Join(out, "render-1000.cpu.pprof")
	f, err := os.Create(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	runtime.MemProfileRate = 512 * 1024
	d := median(renderOnce)
	pprof.StopCPUProfile()
	f.Close()
	mem := filepath.Join(out, "render-1000.alloc.pprof")
	if m, err := os.Create(mem); err == nil {
		_ = pprof.Lookup("allocs").WriteTo(m, 0)
		m.Close()
	}
	fmt.Printf("bench render-1000-profiled median=%.2fs\n", d.Seconds())
	for _, p := range []struct{ file, args string }{{cpu, "-cum"}, {mem, "-sample_index=alloc_space -cum"}} {
		cmd := exec.Command("go", append([]string{"tool", "pprof", "-top", "-nodecount=40"}, append(strings.Fields(p.args), p.file)...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("pprof: %v\n%s", err, b)
			continue
		}
		fmt.Printf("bench profile %s:\n%s\n", filepath.Base(p.file), b)
	}
}
