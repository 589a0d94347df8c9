package main

import (
	"os"
	"runtime/debug"
)

// gcPercent and memoryLimit tune the garbage collector for a short-lived
// process that mostly evaluates CUE: at Go's default (GOGC=100) a third of
// a render's CPU went to collecting garbage. Collecting a quarter as often
// cuts render CPU by about a third; the soft limit keeps peak memory near
// 512 MiB for the biggest releases an inventory can hold (a 2 000-object
// render lives in under 200 MiB). GOGC and GOMEMLIMIT override either.
const (
	gcPercent   = 400
	memoryLimit = 512 << 20
)

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit)
	}
}
