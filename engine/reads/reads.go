// Package reads records the files a render actually opened — the files
// cue/load resolved for every package it built, the files @embed pulled
// in, values files, -f and SOPS files — so that a fingerprint which did
// not cover one of them is caught (engine/fingerprint.Verify) instead of
// becoming a silent skip. It is the safety net under the fingerprint's
// own derivation, as Go's GODEBUG=gocacheverify is under its build cache.
package reads

import (
	"path/filepath"
	"slices"
	"sync"
)

// Set is the files one render read, by absolute path. Safe for
// concurrent use (releases render in parallel); a nil *Set records
// nothing, so callers need no checks.
type Set struct {
	mu    sync.Mutex
	paths map[string]bool
}

// New returns an empty set.
func New() *Set { return &Set{paths: map[string]bool{}} }

// Add records that path was read.
func (s *Set) Add(path string) {
	if s == nil || path == "" {
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	s.mu.Lock()
	s.paths[filepath.Clean(path)] = true
	s.mu.Unlock()
}

// Paths are the recorded paths, sorted.
func (s *Set) Paths() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.paths))
	for p := range s.paths {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
