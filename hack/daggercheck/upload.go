package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
)

// moduleConfig is the part of dagger.json this check reads.
type moduleConfig struct {
	Name          string `json:"name"`
	EngineVersion string `json:"engineVersion"`
	SDK           struct {
		Source string `json:"source"`
	} `json:"sdk"`
	Source  string   `json:"source"`
	Include []string `json:"include"`
}

func readConfig(repo string) (moduleConfig, error) {
	var cfg moduleConfig
	b, err := os.ReadFile(filepath.Join(repo, "dagger.json"))
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("dagger.json: %w", err)
	}
	if cfg.Source == "" {
		cfg.Source = "."
	}
	return cfg, nil
}

// uploadPatterns is what the engine loads from a local module's context
// directory (core/schema/modulesource.go, loadModuleSourceContext): the
// config file, everything under the source directory, and dagger.json's
// include list (relative to dagger.json, which is at the context root here;
// a leading "!" excludes). Later patterns win.
func uploadPatterns(cfg moduleConfig) []string {
	p := []string{"dagger.json", path.Join(cfg.Source, "**", "*")}
	return append(p, cfg.Include...)
}

// uploadedFiles lists the repository files the engine would upload: files
// git does not ignore (the engine honours .gitignore) that match the
// patterns.
func uploadedFiles(repo string, patterns []string) ([]string, error) {
	m, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("dagger.json include patterns: %w", err)
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the repository's files with git (the check needs a git checkout): %w: %s", err, stderr.String())
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		ok, err := m.MatchesOrParentMatches(f)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		// Tracked but deleted in the work tree: not there to upload.
		if _, err := os.Lstat(filepath.Join(repo, f)); err != nil {
			continue
		}
		files = append(files, f)
	}
	return files, nil
}

func copyFiles(repo, dst string, files []string) error {
	for _, f := range files {
		if err := copyFile(filepath.Join(repo, f), filepath.Join(dst, f)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
