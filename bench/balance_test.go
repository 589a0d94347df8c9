//go:build bench

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/opmodel/pipeline/pipeline"
)

// balanceReleases × monoEnvs pairs, of uneven sizes.
const balanceReleases = 1000

// TestBenchShardsByCost measures what balancing shards by recorded render
// cost buys over dealing pairs by count, on monorepos of 1 000 releases (3
// environments) whose sizes differ, drawn with a fixed seed:
//   - mixed: about 2% of the releases have 40 components, 10% have 8 and
//     the rest 1 (many sizes, none dominant);
//   - skewed: about 1% are platform releases of 150 components, the rest
//     have 1 (a few releases dominate).
//
// Main's renders are cached (the first push's review filled the cache),
// and a second push changes the shared package every release reads, so
// every shard renders the head side of its pairs and reads the base side.
// Each shard runs as its own opm process with its own copy of that cache
// (as each runner restores it), one after another: 8 shards by count,
// then 8 shards given `opm review plan --shards 8`'s split. It prints the
// slowest shard of each and their ratio, and checks that both merges are
// the unsharded review's JSON.
func TestBenchShardsByCost(t *testing.T) {
	for _, c := range []struct {
		name string
		size func(r int) int
	}{
		{"mixed", func(r int) int {
			switch {
			case r < 2:
				return 40
			case r < 12:
				return 8
			}
			return 1
		}},
		{"skewed", func(r int) int {
			if r < 1 {
				return 150
			}
			return 1
		}},
	} {
		t.Run(c.name, func(t *testing.T) { shardBalance(t, c.name, c.size) })
	}
}

// shardBalance is TestBenchShardsByCost on one monorepo, release i of
// size(r) components, r drawn from [0, 100).
func shardBalance(t *testing.T, name string, size func(r int) int) {
	work := t.TempDir()
	opm := buildOpm(t, work)
	rng := rand.New(rand.NewPCG(35, 8))
	sizes := make([]int, balanceReleases)
	for i := range sizes {
		sizes[i] = size(rng.IntN(100))
	}
	dir := sharedRepo(t, filepath.Join(work, "org"), balanceReleases, func(i int) int { return sizes[i] })
	cache := filepath.Join(work, "cache")
	run := func(cacheDir string, args ...string) (time.Duration, []byte) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(opm, args...)
		cmd.Env = append(os.Environ(), "OPM_CACHE_DIR="+cacheDir)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("opm %v: %v\n%s", args, err, stderr.String())
		}
		return time.Since(start), stdout.Bytes()
	}
	review := []string{"review", dir, "--base", "main", "-o", "json"}
	run(cache, review...)
	setShared(t, dir, "v3")
	_, whole := run(filepath.Join(work, "none"), append(review, "--no-cache")...)

	// Each shard restores the same cache: a fresh copy of it.
	copies := 0
	restored := func() string {
		copies++
		c := filepath.Join(work, fmt.Sprintf("cache-%d", copies))
		if out, err := exec.Command("cp", "-a", cache, c).CombinedOutput(); err != nil {
			t.Fatalf("copying the cache: %v\n%s", err, out)
		}
		return c
	}
	_, planJSON := run(restored(), "review", "plan", dir, "--base", "main", "--shards", "8", "-o", "json")
	planFile := filepath.Join(work, "plan.json")
	if err := os.WriteFile(planFile, planJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	var plan pipeline.ReviewPlan
	if err := json.Unmarshal(planJSON, &plan); err != nil || plan.Split == nil {
		t.Fatalf("the plan has no split (%v):\n%s", err, lastLines(planJSON, 5))
	}
	shards := func(name string, extra ...string) (slowest time.Duration, times []float64) {
		t.Helper()
		var parts []string
		for i := 1; i <= 8; i++ {
			d, out := run(restored(), append(append(review, "--shard", fmt.Sprintf("%d/8", i)), extra...)...)
			slowest = max(slowest, d)
			times = append(times, d.Seconds())
			p := filepath.Join(work, fmt.Sprintf("%s-%d.json", name, i))
			if err := os.WriteFile(p, out, 0o644); err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p)
		}
		merged, err := exec.Command(opm, append([]string{"review", "merge", "-o", "json"}, parts...)...).Output()
		if err != nil {
			t.Fatalf("opm review merge: %v", err)
		}
		if !bytes.Equal(merged, whole) {
			t.Errorf("the shards split %s, merged, are not the unsharded review's JSON", name)
		}
		return slowest, times
	}
	byCount, countTimes := shards("count")
	byCost, costTimes := shards("cost", "--plan", planFile)
	fmt.Printf("bench shards-by-count-%s pairs=%d slowest=%.1fs shards=%s\n", name, plan.Pairs, byCount.Seconds(), seconds(countTimes))
	fmt.Printf("bench shards-by-cost-%s slowest=%.1fs shards=%s estimated=%s ratio=%.2f (by cost / by count)\n",
		name, byCost.Seconds(), seconds(costTimes), seconds(plan.Split.Seconds), byCost.Seconds()/byCount.Seconds())
}

func seconds(xs []float64) string {
	var b bytes.Buffer
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%.1f", x)
	}
	return b.String()
}
