// Package gctune sets the garbage collector up for opm's short-lived
// processes, which mostly evaluate CUE: at Go's default (GOGC=100) a third
// of a render's CPU went to collecting garbage. Collecting a quarter as
// often cuts render CPU by about a third. The soft limit is 512 MiB per
// core, because renders run one per core (engine/workers.Each), each with
// its own CUE context: it keeps one render of the biggest release an
// inventory can hold (a 2 000-object render lives in under 200 MiB) near
// 512 MiB, and does not make concurrent renders collect more often than a
// lone one would. The opm command applies it
// at start, and the benchmark's in-process cases do the same so they
// measure what the command does. GOGC and GOMEMLIMIT override either.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
)

const (
	gcPercent    = 400
	limitPerCore = 512 << 20
)

// memoryLimit is the soft limit for this process's cores.
func memoryLimit() int64 { return int64(limitPerCore) * int64(runtime.GOMAXPROCS(0)) }

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
