// Command daggercheck loads this repository's Dagger module the way the
// pinned Dagger engine does, without an engine: it copies only what the
// engine uploads (dagger.json, the module's source directory and
// dagger.json's include list, minus git-ignored files) into a temporary
// directory, runs the Go SDK's own code generator (built from the
// github.com/dagger/dagger module this tool pins) against the core API
// schema, then builds and vets the result as the engine would. It also
// checks that the module's go.mod/go.sum are what codegen leaves, that no
// module in the build needs a newer Go than the engine has, and that every
// `dagger call` in the Markdown (README, docs/) and .github/workflows names functions and
// flags the module really has.
//
// `make test` runs it (target daggercheck); it needs the Go module proxy the
// first time and nothing else.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

const daggerModule = "github.com/dagger/dagger"

// engineGo is the Go each engine version builds Go SDK modules with; a
// module (or a dependency) whose go line is newer fails to load there.
var engineGo = map[string]string{
	"v0.19.7": "1.25.3",
}

func main() {
	repo := flag.String("repo", "../..", "the repository root (holds dagger.json)")
	codegen := flag.String("codegen", "../../bin/dagger-codegen", "the Go SDK code generator built from "+daggerModule)
	keep := flag.Bool("keep", false, "keep the temporary engine-shaped copy and print where it is")
	writeGoMod := flag.Bool("write-gomod", false, "copy the go.mod/go.sum codegen leaves back into the module's source directory")
	flag.Parse()
	if err := run(*repo, *codegen, *keep, *writeGoMod); err != nil {
		fmt.Fprintln(os.Stderr, "daggercheck:", err)
		os.Exit(1)
	}
}

func run(repo, codegen string, keep, writeGoMod bool) error {
	start := time.Now()
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	codegen, err = filepath.Abs(codegen)
	if err != nil {
		return err
	}
	cfg, err := readConfig(repo)
	if err != nil {
		return err
	}
	pinned, err := pinnedDaggerVersion()
	if err != nil {
		return err
	}
	var problems []string
	if cfg.SDK.Source != "go" {
		return fmt.Errorf("dagger.json: sdk.source is %q; this check knows the Go SDK only", cfg.SDK.Source)
	}
	if cfg.EngineVersion != pinned {
		problems = append(problems, fmt.Sprintf("dagger.json: engineVersion is %q but hack/daggercheck pins %s %s; keep them equal so this check runs the engine's own codegen",
			cfg.EngineVersion, daggerModule, pinned))
	}
	goMax, ok := engineGo[pinned]
	if !ok {
		return fmt.Errorf("hack/daggercheck does not know which Go engine %s builds modules with; add it to engineGo", pinned)
	}

	daggerDir, err := moduleDir(daggerModule)
	if err != nil {
		return err
	}
	schema, err := moduleSchema(daggerDir, pinned)
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "daggercheck-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("engine-shaped copy in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	schemaPath := filepath.Join(tmp, "schema.json")
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	if err := os.WriteFile(schemaPath, b, 0o644); err != nil {
		return err
	}

	ctxDir := filepath.Join(tmp, "src")
	files, err := uploadedFiles(repo, uploadPatterns(cfg))
	if err != nil {
		return err
	}
	if err := copyFiles(repo, ctxDir, files); err != nil {
		return err
	}
	srcDir := filepath.Join(ctxDir, cfg.Source)
	// The engine deletes the generated files before codegen runs; they are
	// git-ignored, so they were not copied.
	before := map[string][]byte{}
	for _, f := range []string{"go.mod", "go.sum"} {
		before[f], _ = os.ReadFile(filepath.Join(srcDir, f))
	}

	steps := []struct {
		what string
		args []string
	}{
		{"codegen (the engine's generate-module)", []string{codegen, "generate-module", "--output", ctxDir,
			"--module-source-path", srcDir, "--module-name", cfg.Name, "--introspection-json-path", schemaPath}},
		{"go build (the engine's runtime build)", []string{"go", "build", "-ldflags", "-s -w", "-o", filepath.Join(tmp, "runtime"), "."}},
		{"go vet", []string{"go", "vet", "."}},
	}
	for _, s := range steps {
		if out, err := runIn(srcDir, s.args...); err != nil {
			problems = append(problems, fmt.Sprintf("%s failed in the engine-shaped copy (only %s uploaded; dagger.json include: %q):\n%s",
				s.what, describeUpload(files, cfg.Source), cfg.Include, indent(out)))
			return report(problems, start)
		}
	}

	for _, f := range []string{"go.mod", "go.sum"} {
		after, err := os.ReadFile(filepath.Join(srcDir, f))
		if err != nil {
			return err
		}
		if bytes.Equal(before[f], after) {
			continue
		}
		if writeGoMod {
			if err := os.WriteFile(filepath.Join(repo, cfg.Source, f), after, 0o644); err != nil {
				return err
			}
			fmt.Printf("wrote %s/%s\n", cfg.Source, f)
			continue
		}
		problems = append(problems, fmt.Sprintf("%s/%s is not what the engine's codegen (go mod tidy) leaves; run `make dagger-gomod` and commit it", cfg.Source, f))
	}

	if p, err := goVersions(srcDir, goMax); err != nil {
		return err
	} else {
		problems = append(problems, p...)
	}

	api, err := moduleAPI(filepath.Join(srcDir, "dagger.gen.go"), cfg.Name, schema)
	if err != nil {
		return err
	}
	if api.description == "" {
		problems = append(problems, fmt.Sprintf("%s/: no package comment, which is the module's description in `dagger functions` and the Daggerverse", cfg.Source))
	}
	p, err := checkCallsInRepo(repo, api)
	if err != nil {
		return err
	}
	problems = append(problems, p...)
	return report(problems, start)
}

func report(problems []string, start time.Time) error {
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	fmt.Printf("daggercheck: the module loads as engine %s would load it (%s)\n", mustPinned(), time.Since(start).Round(100*time.Millisecond))
	return nil
}

func mustPinned() string {
	v, _ := pinnedDaggerVersion()
	return v
}

func describeUpload(files []string, source string) string {
	var outside []string
	for _, f := range files {
		if !strings.HasPrefix(f, source+"/") && f != "dagger.json" {
			outside = append(outside, f)
		}
	}
	if len(outside) == 0 {
		return "dagger.json and " + source + "/"
	}
	return fmt.Sprintf("dagger.json, %s/ and %d included files", source, len(outside))
}

// pinnedDaggerVersion is the github.com/dagger/dagger version this binary
// was built with, i.e. what hack/daggercheck/go.mod requires.
func pinnedDaggerVersion() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information in the binary")
	}
	for _, d := range bi.Deps {
		if d.Path == daggerModule {
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s is not a dependency of this binary", daggerModule)
}

// moduleDir downloads (or finds in the module cache) a dependency of this
// tool module. The tool module's go.sum holds its hash, so the checksum
// database (which does not serve github.com/dagger/dagger) is not asked.
func moduleDir(mod string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s (run from hack/daggercheck): %w\n%s%s", mod, err, out, stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", mod, info.Error)
	}
	return info.Dir, nil
}

// goVersions reports every module of the build whose go line is newer than
// the engine's Go, which would refuse to build it.
func goVersions(dir, goMax string) ([]string, error) {
	out, err := runIn(dir, "go", "list", "-m", "-f", "{{.Path}} {{.GoVersion}}", "all")
	if err != nil {
		return nil, fmt.Errorf("go list -m all: %w\n%s", err, out)
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if version.Compare("go"+f[1], "go"+goMax) > 0 {
			problems = append(problems, fmt.Sprintf("%s needs go %s but the engine builds modules with go %s: lower its go line (or pick an older version of it)", f[0], f[1], goMax))
		}
	}
	return problems, nil
}

func runIn(dir string, args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// indent keeps the end of a command's output (where the error is), without
// codegen's progress lines.
func indent(s string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, " INFO ") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 30 {
		lines = append([]string{fmt.Sprintf("… (%d lines before)", len(lines)-30)}, lines[len(lines)-30:]...)
	}
	return "    " + strings.Join(lines, "\n    ")
}
