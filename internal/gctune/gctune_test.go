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
	limit := debug.SetMemoryLimit(math.MaxInt64)
	assert.Equal(t, limit, limitFor(runtime.GOMAXPROCS(0), available(os.ReadFile)))
	assert.Assert(t, limit >= int64(512<<20)*int64(runtime.GOMAXPROCS(0)), "limit %d", limit)

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

// The limit is half of what the process may use, never less than 512 MiB
// a core: a cgroup's limit counts when it is below the machine's memory.
func TestLimitFollowsTheMemoryAvailable(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if s, ok := m[p]; ok {
				return []byte(s), nil
			}
			return nil, os.ErrNotExist
		}
	}
	meminfo := "MemTotal:       24000000 kB\nMemFree:        19000000 kB\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"machine", map[string]string{"/proc/meminfo": meminfo}, 24000000 << 10},
		{"cgroup v2 below the machine", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "4294967296\n"}, 4 << 30},
		{"cgroup v2 without a limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 24000000 << 10},
		{"cgroup v1 without a limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 24000000 << 10},
		{"cgroup v1 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648"}, 2 << 30},
		{"unknown", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, available(files(tc.files)), tc.want)
		})
	}
	assert.Equal(t, limitFor(2, 24<<30), int64(12<<30))
	assert.Equal(t, limitFor(2, 0), int64(1<<30))
	assert.Equal(t, limitFor(4, 2<<30), int64(2<<30))
}
