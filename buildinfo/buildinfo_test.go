package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/catalog"
)

func TestLinkerValuesWin(t *testing.T) {
	bi := &debug.BuildInfo{
		Main:     debug.Module{Path: "github.com/opmodel/pipeline", Version: "v0.9.0"},
		Deps:     []*debug.Module{{Path: "cuelang.org/go", Version: "v0.17.1"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}},
	}
	info := fromBuild(bi, "v1.2.3", "fedcba9876543210", "2026-11-23T12:00:00Z")
	assert.Equal(t, info.Version, "v1.2.3")
	assert.Equal(t, info.Commit, "fedcba9876543210")
	assert.Equal(t, info.Date, "2026-11-23T12:00:00Z")
	assert.Equal(t, info.CUEVersion, "v0.17.1")
	assert.Equal(t, info.Catalog, catalog.ModulePath+" "+catalog.Version)
	assert.Equal(t, info.GoVersion, runtime.Version())
	assert.Equal(t, info.Footer(), "<sub>opm v1.2.3 (fedcba987654) · CUE v0.17.1 · catalog "+info.Catalog+"</sub>")
}

// `go install github.com/opmodel/pipeline/cmd/opm@v1.4.0` records the
// module version and (for a VCS checkout) the commit.
func TestGoInstallBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/opmodel/pipeline", Version: "v1.4.0"},
		Deps: []*debug.Module{{Path: "cuelang.org/go", Version: "v0.17.0", Replace: &debug.Module{Path: "cuelang.org/go", Version: "v0.17.1"}}},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	info := fromBuild(bi, "", "", "")
	assert.Equal(t, info.Version, "v1.4.0")
	assert.Equal(t, info.ShortCommit(), "0123456789ab-dirty")
	assert.Equal(t, info.Date, "2026-01-02T03:04:05Z")
	assert.Equal(t, info.CUEVersion, "v0.17.1", "a replaced module reports the replacement")
	assert.Assert(t, strings.Contains(info.Text(), "commit:   0123456789ab-dirty\n"), info.Text())
}

func TestDevelBuild(t *testing.T) {
	info := fromBuild(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", "")
	assert.Equal(t, info.Version, "devel")
	assert.Equal(t, info.Commit, "")
	assert.Equal(t, info.Footer(), "<sub>opm devel · CUE unknown · catalog "+info.Catalog+"</sub>")
}
