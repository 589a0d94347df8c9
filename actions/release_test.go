package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/actions/internal/fakegithub"
)

// releaseScript runs actions/release.sh with env and returns its
// GITHUB_OUTPUT, stdout+stderr and error.
func releaseScript(t *testing.T, verb string, env map[string]string) (output, log string, err error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "output")
	assert.NilError(t, os.WriteFile(out, nil, 0o644))
	cmd := exec.Command("bash", "release.sh", verb)
	cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+out)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	b, err := cmd.CombinedOutput()
	o, rerr := os.ReadFile(out)
	assert.NilError(t, rerr)
	return string(o), string(b), err
}

// A version tag is its own release; a moving major tag is the highest
// version tag on its commit (read from the tags API, every page); any
// other ref builds from source.
func TestReleaseResolvesTheActionRef(t *testing.T) {
	srv := fakegithub.New(token)
	t.Cleanup(srv.Close)
	for i := range 150 {
		srv.Tags = append(srv.Tags, fakegithub.Tag{Name: fmt.Sprintf("v0.%d.0", i), SHA: fmt.Sprintf("old%d", i)})
	}
	srv.Tags = append(srv.Tags,
		fakegithub.Tag{Name: "v1.2.3", SHA: "aaa"}, fakegithub.Tag{Name: "v1", SHA: "aaa"},
		fakegithub.Tag{Name: "v1.2.10", SHA: "aaa"}, fakegithub.Tag{Name: "v1.3.0-rc.1", SHA: "aaa"},
		fakegithub.Tag{Name: "v1.4.0", SHA: "bbb"})
	env := func(ref string) map[string]string {
		return map[string]string{"ACTION_REF": ref, "ACTION_REPOSITORY": "opmodel/pipeline", "GITHUB_API_URL": srv.URL, "GITHUB_TOKEN": token}
	}
	for ref, want := range map[string]string{
		"v1.2.3":      "v1.2.3",
		"v2.0.0-rc.1": "v2.0.0-rc.1",
		"v1":          "v1.2.10", // numeric order, not v1.2.3; not the rc; not v1.4.0 on another commit
		"main":        "",
		"0a1b2c3d":    "",
		"":            "",
	} {
		out, log, err := releaseScript(t, "resolve", env(ref))
		assert.NilError(t, err, log)
		assert.Equal(t, out, "version="+want+"\n", "ref %q: %s", ref, log)
	}
	pages := 0
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r, "GET /repos/opmodel/pipeline/tags?") {
			pages++
		}
	}
	assert.Equal(t, pages, 3, "only v1 asks the API, and reads pages until an empty one")

	// An API that refuses: build from source, with a warning.
	e := env("v1")
	e["GITHUB_TOKEN"] = "wrong"
	out, log, err := releaseScript(t, "resolve", e)
	assert.NilError(t, err, log)
	assert.Equal(t, out, "version=\n")
	assert.Assert(t, strings.Contains(log, "::warning::could not list the tags"), log)
}

// The download is checked against checksums.txt before it is unpacked; a
// mismatch fails and leaves nothing to run.
func TestReleaseDownloadVerifiesTheChecksum(t *testing.T) {
	srv := fakegithub.New(token)
	t.Cleanup(srv.Close)
	script := []byte("#!/bin/sh\necho released opm-action\n")
	linux := tarGz(t, map[string][]byte{"opm-action": script, "opm": script, "README.md": []byte("x")})
	windows := zipOf(t, map[string][]byte{"opm-action.exe": script, "opm.exe": script})
	sums := fmt.Sprintf("%s  opm_1.2.3_linux_amd64.tar.gz\n%s  opm_1.2.3_windows_arm64.zip\n", sha(linux), sha(windows))
	srv.Releases = map[string]map[string][]byte{"v1.2.3": {
		"opm_1.2.3_linux_amd64.tar.gz": linux, "opm_1.2.3_windows_arm64.zip": windows, "checksums.txt": []byte(sums),
	}}
	env := func(os, arch string) map[string]string {
		return map[string]string{"VERSION": "v1.2.3", "ACTION_REPOSITORY": "opmodel/pipeline", "GITHUB_SERVER_URL": srv.URL,
			"RUNNER_OS": os, "RUNNER_ARCH": arch, "DEST": filepath.Join(t.TempDir(), "opm-action")}
	}

	e := env("Linux", "X64")
	_, log, err := releaseScript(t, "download", e)
	assert.NilError(t, err, log)
	run, err := exec.Command(filepath.Join(e["DEST"], "opm-action")).Output()
	assert.NilError(t, err)
	assert.Equal(t, string(run), "released opm-action\n")

	e = env("Windows", "ARM64")
	_, log, err = releaseScript(t, "download", e)
	assert.NilError(t, err, log)
	_, err = os.Stat(filepath.Join(e["DEST"], "opm-action.exe"))
	assert.NilError(t, err)

	// Tampered: the archive no longer matches checksums.txt.
	srv.Releases["v1.2.3"]["opm_1.2.3_linux_amd64.tar.gz"] = tarGz(t, map[string][]byte{"opm-action": []byte("#!/bin/sh\necho evil\n")})
	e = env("Linux", "X64")
	_, log, err = releaseScript(t, "download", e)
	assert.Assert(t, err != nil, "a tampered archive fails")
	assert.Assert(t, strings.Contains(log, "checksum mismatch for opm_1.2.3_linux_amd64.tar.gz"), log)
	_, err = os.Stat(filepath.Join(e["DEST"], "opm-action"))
	assert.Assert(t, os.IsNotExist(err), "nothing to run")

	// A platform the release does not list.
	_, log, err = releaseScript(t, "download", env("macOS", "ARM64"))
	assert.Assert(t, err != nil)
	assert.Assert(t, strings.Contains(log, "downloading") || strings.Contains(log, "lists no"), log)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func tarGz(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, b := range files {
		assert.NilError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(b))}))
		_, err := tw.Write(b)
		assert.NilError(t, err)
	}
	assert.NilError(t, tw.Close())
	assert.NilError(t, gz.Close())
	return buf.Bytes()
}

func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, b := range files {
		w, err := zw.Create(name)
		assert.NilError(t, err)
		_, err = w.Write(b)
		assert.NilError(t, err)
	}
	assert.NilError(t, zw.Close())
	return buf.Bytes()
}

// .goreleaser.yaml builds what release.sh downloads: opm-action from
// ./actions for every runner platform, in archives named as the script
// expects, with the version linked in where buildinfo reads it.
func TestGoreleaserConfigMatchesTheDownload(t *testing.T) {
	b, err := os.ReadFile("../.goreleaser.yaml")
	assert.NilError(t, err)
	var cfg struct {
		Builds []struct {
			ID, Main, Binary string
			Goos, Goarch     []string
			Ldflags          []string
		}
		Archives []struct {
			IDs             []string `json:"ids"`
			NameTemplate    string   `json:"name_template"`
			Formats         []string
			FormatOverrides []struct {
				Goos    string
				Formats []string
			} `json:"format_overrides"`
		}
		Checksum struct {
			NameTemplate string `json:"name_template"`
			Algorithm    string
		}
	}
	assert.NilError(t, yaml.Unmarshal(b, &cfg))
	byID := map[string]int{}
	for i, bd := range cfg.Builds {
		byID[bd.ID] = i
		assert.DeepEqual(t, bd.Goos, []string{"linux", "darwin", "windows"})
		assert.DeepEqual(t, bd.Goarch, []string{"amd64", "arm64"})
		flags := strings.Join(bd.Ldflags, " ")
		// The commit's date, not the build's: a rebuild is the same binary.
		for _, v := range []string{"version={{ .Tag }}", "commit={{ .FullCommit }}", "date={{ .CommitDate }}"} {
			assert.Assert(t, strings.Contains(flags, "-X github.com/opmodel/pipeline/buildinfo."+v), "%s: %s", bd.ID, flags)
		}
	}
	assert.Equal(t, cfg.Builds[byID["opm-action"]].Main, "./actions")
	assert.Equal(t, cfg.Builds[byID["opm-action"]].Binary, "opm-action")
	assert.Equal(t, cfg.Builds[byID["opm"]].Main, "./cmd/opm")
	assert.Equal(t, len(cfg.Archives), 1)
	ar := cfg.Archives[0]
	assert.DeepEqual(t, ar.IDs, []string{"opm", "opm-action"})
	assert.Equal(t, ar.NameTemplate, "opm_{{ .Version }}_{{ .Os }}_{{ .Arch }}")
	assert.DeepEqual(t, ar.Formats, []string{"tar.gz"})
	assert.Equal(t, ar.FormatOverrides[0].Goos, "windows")
	assert.DeepEqual(t, ar.FormatOverrides[0].Formats, []string{"zip"})
	assert.Equal(t, cfg.Checksum.NameTemplate, "checksums.txt")
	assert.Equal(t, cfg.Checksum.Algorithm, "sha256")
}
