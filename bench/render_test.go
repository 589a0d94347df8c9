//go:build bench

package bench

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestBenchRenderScaling times `opm render` (process start-up, load,
// render, output) of one release of 10, 50, 200 and 500 components (four
// objects each) and prints ms per component and the 500/50 ratio, which
// is 10 for a linear render; and opm's peak RSS at 500.
func TestBenchRenderScaling(t *testing.T) {
	work := t.TempDir()
	opm := buildOpm(t, work)
	times := map[int]time.Duration{}
	for _, n := range []int{10, 50, 200, 500} {
		dir := peerDeployment(t, filepath.Join(work, fmt.Sprint(n)), "bench", n, 0)
		var rss int64
		times[n] = median(func() time.Duration {
			d, _, r := measured(t, 0, opm, "render", dir)
			rss = max(rss, r)
			return d
		})
		fmt.Printf("bench render-components-%d opm=%.2fs ms-per-component=%.1f\n", n, times[n].Seconds(), float64(times[n].Milliseconds())/float64(n))
		if n == 500 {
			fmt.Printf("bench rss render-500 opm=%dMiB\n", rss/1024)
		}
	}
	fmt.Printf("bench render-scaling 500/50=%.2f (linear: 10)\n", times[500].Seconds()/times[50].Seconds())
}
