package gctune

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"gotest.tools/v3/assert"
)

func unset(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // restores the variable after the test
	assert.NilError(t, os.Unsetenv(name))
}

func TestApplySetsTheCollectorUnlessTheEnvironmentDoes(t *testing.T) {
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})

	unset(t, "GOGC")
	unset(t, "GOMEMLIMIT")
	Apply()
	assert.Equal(t, debug.SetGCPercent(100), gcPercent)
	assert.Equal(t, debug.SetMemoryLimit(math.MaxInt64), int64(512<<20)*int64(runtime.GOMAXPROCS(0)))

	// The runtime read GOGC and GOMEMLIMIT at start; Apply leaves what the
	// user chose.
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "2GiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(2 << 30)
	Apply()
	assert.Equal(t, debug.SetGCPercent(100), 150)
	assert.Equal(t, debug.SetMemoryLimit(math.MaxInt64), int64(2<<30))
}
