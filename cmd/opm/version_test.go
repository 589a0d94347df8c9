package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/catalog"
)

// A release build sets version, commit and date with -ldflags, exactly as
// .goreleaser.yaml and the Makefile do; the binary reports them, with the
// CUE version it links and the catalog it embeds.
func TestVersionFromLinkerFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "opm")
	const pkg = "github.com/opmodel/pipeline/buildinfo"
	ldflags := "-X " + pkg + ".version=v9.8.7 -X " + pkg + ".commit=0123456789abcdef -X " + pkg + ".date=2026-11-23T12:00:00Z"
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, ".")
	out, err := build.CombinedOutput()
	assert.NilError(t, err, string(out))

	out, err = exec.Command(bin, "version", "-o", "json").Output()
	assert.NilError(t, err)
	var info buildinfo.Info
	assert.NilError(t, json.Unmarshal(out, &info))
	assert.Equal(t, info.Version, "v9.8.7")
	assert.Equal(t, info.Commit, "0123456789abcdef")
	assert.Equal(t, info.Date, "2026-11-23T12:00:00Z")
	assert.Equal(t, info.CUEVersion, requiredVersion(t, "cuelang.org/go"))
	assert.Equal(t, info.Catalog, catalog.ModulePath+" "+catalog.Version)
	assert.Assert(t, strings.HasPrefix(info.GoVersion, "go1."))

	out, err = exec.Command(bin, "version").Output()
	assert.NilError(t, err)
	assert.Assert(t, strings.HasPrefix(string(out), "version:  v9.8.7\ncommit:   0123456789ab\nbuilt:    2026-11-23T12:00:00Z\n"), string(out))

	// opm --version, as a newcomer tries first: one line.
	out, err = exec.Command(bin, "--version").Output()
	assert.NilError(t, err)
	assert.Assert(t, strings.HasPrefix(string(out), "opm v9.8.7 (commit 0123456789ab, built 2026-11-23T12:00:00Z, "), string(out))
	assert.Equal(t, strings.Count(string(out), "\n"), 1, string(out))
}

func TestVersionRejectsUnknownOutput(t *testing.T) {
	code, _, errOut := runOpm(t, "version", "-o", "yaml")
	assert.Equal(t, code, 2)
	assert.Assert(t, strings.Contains(errOut, "-o must be text or json"), errOut)
}

// requiredVersion reads a requirement's version from the module's go.mod.
func requiredVersion(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	assert.NilError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	t.Fatalf("go.mod does not require %s", path)
	return ""
}
