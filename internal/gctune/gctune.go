// Package gctune sets the garbage collector up for opm's short-lived
// processes, which mostly evaluate CUE: at Go's default (GOGC=100) a third
// of a render's CPU went to collecting garbage. Collecting a quarter as
// often cuts render CPU by about a third; the soft limit keeps peak memory
// near 512 MiB for the biggest releases an inventory can hold (a
// 2 000-object render lives in under 200 MiB). The opm command applies it
// at start, and the benchmark's in-process cases do the same so they
// measure what the command does. GOGC and GOMEMLIMIT override either.
package gctune

import (
	"os"
	"runtime/debug"
)

const (
	gcPercent   = 400
	memoryLimit = 512 << 20
)

// Apply sets the collector's target and soft memory limit, each unless
// its environment variable is set.
func Apply() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit)
	}
}
