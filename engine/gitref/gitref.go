// Package gitref materialises a git ref of a repository as a directory of
// files, so a review can render the deployment as it was at the base of a
// pull request next to the working tree's head, and finds merge bases.
//
// It runs the git binary. ReadFiles reads a directory of a commit
// straight from the object store, writing nothing, when nothing could
// make a checkout write other bytes (no attributes, no end-of-line
// conversion, no links or submodules). Otherwise a ref is checked out with
// `git worktree add --detach` rather than extracted with `git archive`: a
// worktree goes through the same checkout path as the head (smudge
// filters such as Git LFS, eol conversion) and ignores `export-ignore`
// attributes, which could silently drop files from an archive, so base
// and head differ only by their commits. Hooks are disabled for the
// checkout.
package gitref

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Worktree is a ref checked out in a temporary directory. Remove it with
// Close when done.
type Worktree struct {
	// Dir is the root of the checked-out tree.
	Dir string
	// Commit is the full commit hash that was checked out.
	Commit string

	repo string
	tmp  string
}

// Root returns the top-level directory of the repository that holds dir.
func Root(ctx context.Context, dir string) (string, error) {
	out, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("finding the git repository of %s: %w", dir, err)
	}
	return out, nil
}

// Resolve returns the commit hash ref names in repo.
func Resolve(ctx context.Context, repo, ref string) (string, error) {
	if ref == "" {
		return "", errors.New("resolving a git ref: the ref is empty")
	}
	out, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("resolving git ref %q in %s: no such commit%s", ref, repo, shallowHint(ctx, repo))
	}
	return out, nil
}

// MergeBase returns the best common ancestor of a and b: the commit a pull
// request from b into a is compared against.
func MergeBase(ctx context.Context, repo, a, b string) (string, error) {
	ca, err := Resolve(ctx, repo, a)
	if err != nil {
		return "", err
	}
	cb, err := Resolve(ctx, repo, b)
	if err != nil {
		return "", err
	}
	out, err := git(ctx, repo, "merge-base", ca, cb)
	if err != nil {
		return "", fmt.Errorf("finding the merge base of %s and %s: %w%s", a, b, err, shallowHint(ctx, repo))
	}
	return out, nil
}

// Checkout checks ref out, detached, into a new temporary directory.
func Checkout(ctx context.Context, repo, ref string) (*Worktree, error) {
	commit, err := Resolve(ctx, repo, ref)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "opm-gitref-")
	if err != nil {
		return nil, fmt.Errorf("creating a directory for %s: %w", ref, err)
	}
	dir := filepath.Join(tmp, "tree")
	if _, err := git(ctx, repo, "worktree", "add", "--detach", "--quiet", dir, commit); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("checking out %s (%s): %w", ref, Short(commit), err)
	}
	return &Worktree{Dir: dir, Commit: commit, repo: repo, tmp: tmp}, nil
}

// Close removes the worktree's files and git's record of it. It is safe to
// call more than once.
func (w *Worktree) Close(ctx context.Context) error {
	if w == nil || w.tmp == "" {
		return nil
	}
	_, rmErr := git(ctx, w.repo, "worktree", "remove", "--force", w.Dir)
	// Whatever git managed, the files go, and prune forgets a worktree
	// whose directory is gone.
	err := errors.Join(rmErr, os.RemoveAll(w.tmp))
	if _, perr := git(ctx, w.repo, "worktree", "prune"); perr != nil && err == nil {
		err = perr
	}
	w.tmp = ""
	if err != nil {
		return fmt.Errorf("removing the worktree of %s: %w", Short(w.Commit), err)
	}
	return nil
}

// shallowHint explains the usual cause of a missing commit in CI.
func shallowHint(ctx context.Context, repo string) string {
	if out, err := git(ctx, repo, "rev-parse", "--is-shallow-repository"); err == nil && out == "true" {
		return " (the clone is shallow: check out with full history, e.g. actions/checkout with fetch-depth: 0)"
	}
	return ""
}

// git runs git in dir and returns its output trimmed (gitBytes, the one
// place git is started).
func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitBytes(ctx, dir, nil, args...)
	return strings.TrimSpace(string(out)), err
}

// Short is a commit as people read it: its first 12 hex digits.
func Short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
