package gitref

import (
	"context"
	"fmt"
)

// State is what git says about a directory's files: the commit checked
// out, the branch (or exact tag) it is on, and whether files under the
// directory differ from that commit.
type State struct {
	Commit string
	// Ref is the branch, else a tag pointing at Commit, else "" (a
	// detached checkout).
	Ref string
	// Dirty is true when files under the directory are modified, added
	// or untracked: the commit alone does not reproduce them.
	Dirty bool
}

// StateOf reports the state of dir, which must be inside a repository.
func StateOf(ctx context.Context, dir string) (State, error) {
	commit, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return State{}, fmt.Errorf("reading the commit of %s: %w", dir, err)
	}
	s := State{Commit: commit}
	if ref, err := git(ctx, dir, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		s.Ref = ref
	} else if tag, err := git(ctx, dir, "describe", "--tags", "--exact-match", "HEAD"); err == nil {
		s.Ref = tag
	}
	status, err := git(ctx, dir, "status", "--porcelain", "--untracked-files=normal", "--", ".")
	if err != nil {
		return State{}, fmt.Errorf("reading the status of %s: %w", dir, err)
	}
	s.Dirty = status != ""
	return s, nil
}
