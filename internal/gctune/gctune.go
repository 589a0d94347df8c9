// Package gctune sets the garbage collector up for opm's short-lived
// processes, which mostly evaluate CUE: at Go's default (GOGC=100) a third
// of a render's CPU went to collecting garbage. Collecting a quarter as
// often cuts render CPU by about a third. The soft limit is half the
// memory the process may use (its cgroup's limit, else the machine's), and
// at least 512 MiB per core, because renders run one per core
// (engine/workers.Each), each with its own CUE context. A limit below what
// a render keeps alive makes the collector run without pause: an OPM v2
// module of 200 components (about 1.5 GB live) took 173 s of CPU under a
// fixed 1 GiB limit and 26 s under 8 GiB. The opm command applies it at
// start, and the benchmark's in-process cases do the same so they measure
// what the command does. GOGC and GOMEMLIMIT override either.
package gctune

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
)

const (
	gcPercent    = 400
	limitPerCore = 512 << 20
)

// memoryLimit is the soft limit for this process.
func memoryLimit() int64 { return limitFor(runtime.GOMAXPROCS(0), available(os.ReadFile)) }

// limitFor is half of the memory available (0: unknown), at least
// limitPerCore for each core.
func limitFor(cores int, available int64) int64 {
	return max(int64(limitPerCore)*int64(cores), available/2)
}

// available is the memory this process may use: its cgroup's limit (v2,
// then v1) when it sets one below the machine's, else the machine's
// (Linux's /proc/meminfo); 0 where neither can be read.
func available(read func(string) ([]byte, error)) int64 {
	var total int64
	if b, err := read("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(bytes.NewReader(b))
		for s.Scan() {
			f := bytes.Fields(s.Bytes())
			if len(f) >= 2 && string(f[0]) == "MemTotal:" {
				if kb, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
					total = kb << 10
				}
			}
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := read(p)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) mean no limit.
		if n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			return n
		}
		break
	}
	return total
}

// Apply sets the collector's target and soft memory limit, each unless
// its environment variable is set.
func Apply() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit())
	}
}
