// Package bench times opm against kubectl on a real API server. It holds no
// library code: the benchmark is a test behind the "bench" build tag, so
// `make test` never runs it. `make bench` does:
//
//	cd bench && go test -tags bench -count=1 -run TestBench
//
// It starts the test control plane (internal/kubetest), generates a CUE
// deployment with one release of 200 objects, and in one run times `opm
// apply` (fresh, then again with no change) and `kubectl apply
// --server-side` of the same manifests (fresh into another namespace, then
// again), then opm diff against kubectl diff --server-side with 10% of the
// objects changed, opm status against kubectl get -f, and the requests each
// discovery strategy sends. Repeatable cases report the median of 3 runs.
// It prints one line per case:
//
//	bench apply-200 opm=<s>s kubectl=<s>s ratio=<opm/kubectl>
//	bench reapply-200 opm=<s>s kubectl=<s>s ratio=<opm/kubectl>
//	bench diff-200 …, bench status-200 …
//	bench discovery-200 inventory=<n>req labels=<m>req ratio=<n/m>
//
// TestBenchPeers adds apply, re-apply and diff at 200 and 1 000 objects
// against kubectl (1 000) and fluxcd/pkg/ssa's ResourceManager (both; the
// driver is the bench/ssa module, built by the test), opm's render time
// alone and its peak RSS; TestBenchReview times a 10 releases × 3
// environments review against the sequential path; TestBenchRenderScaling
// renders 10 to 500 components; TestBenchWave applies a wave of three
// environments on three control planes against one environment and against
// the three one after the other; TestBenchReviewAtScale reviews 1 000
// releases × 3 environments (no cache, warm cache, 8 shards) and
// TestBenchShardsByCost compares 8 shards dealt by count with 8 split by
// recorded cost on releases of uneven sizes. docs/performance.md lists
// every line they print.
//
// Both tools run as separate processes, so each pays its own start-up,
// discovery and (for opm) CUE rendering; kubectl gets a warm discovery
// cache first, which favours it.
package bench
