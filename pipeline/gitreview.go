package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
)

// reviewGit is Review with BaseRefs: the first ref that resolves is merged
// with HEAD, the merge base is checked out into a temporary worktree, and
// the deployment directory there is the base side.
func reviewGit(ctx context.Context, opts ReviewOptions) (*ChangeSet, error) {
	dir, err := filepath.Abs(opts.renderOptions().Dir)
	if err != nil {
		return nil, fmt.Errorf("finding the deployment directory %s: %w", opts.Dir, err)
	}
	repo, err := gitref.Root(ctx, dir)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, err)
	}
	ref, commit, err := resolveFirst(ctx, repo, opts.BaseRefs)
	if err != nil {
		return nil, err
	}
	base, err := gitref.MergeBase(ctx, repo, commit, "HEAD")
	if err != nil {
		return nil, err
	}
	root, baseDir, done, err := checkoutDir(ctx, repo, dir, base)
	if err != nil {
		return nil, err
	}
	defer done()
	o := opts
	o.BaseRefs, o.BaseDir = nil, baseDir
	cs, err := Review(ctx, o)
	if err != nil {
		return nil, err
	}
	cs.BaseRef, cs.BaseCommit = ref, base
	// Errors name files by absolute path; relative to the repository they
	// read better and do not show this machine's layout.
	prefixes := []string{repo + string(filepath.Separator), root + string(filepath.Separator)}
	for i := range cs.Releases {
		for _, p := range prefixes {
			cs.Releases[i].Error = strings.ReplaceAll(cs.Releases[i].Error, p, "")
		}
	}
	return cs, nil
}

// resolveFirst returns the first of refs that names a commit in repo.
// None is a not-found error listing every ref tried.
func resolveFirst(ctx context.Context, repo string, refs []string) (ref, commit string, err error) {
	var errs []error
	var tried []string
	for _, r := range refs {
		if r == "" || r == "origin/" {
			continue
		}
		tried = append(tried, strconv.Quote(r))
		c, err := gitref.Resolve(ctx, repo, r)
		if err == nil {
			return r, c, nil
		}
		errs = append(errs, err)
	}
	if len(tried) == 0 {
		return "", "", fault.Validationf("finding the base to review against: no base ref given")
	}
	return "", "", fault.Wrap(fault.NotFound, fmt.Errorf("finding the base to review against: no such commit in %s (tried %s): %w",
		repo, strings.Join(tried, ", "), errors.Join(errs...)))
}

// checkoutDir checks commit of repo out into a temporary worktree and
// returns the worktree's root and where the deployment directory dir is
// inside it; done removes the worktree.
func checkoutDir(ctx context.Context, repo, dir, commit string) (root, baseDir string, done func(), err error) {
	rel, err := relPath(repo, dir)
	if err != nil {
		return "", "", nil, err
	}
	wt, err := gitref.Checkout(ctx, repo, commit)
	if err != nil {
		return "", "", nil, err
	}
	done = func() { _ = wt.Close(context.WithoutCancel(ctx)) }
	return wt.Dir, filepath.Join(wt.Dir, rel), done, nil
}

// relPath is dir relative to repo, resolving symlinks on both (macOS'
// /var → /private/var).
func relPath(repo, dir string) (string, error) {
	rr, err := filepath.EvalSymlinks(repo)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", repo, err)
	}
	dr, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("resolving the deployment directory %s: %w", dir, err)
	}
	rel, err := filepath.Rel(rr, dr)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fault.Validationf("the deployment directory %s is not inside the git repository %s", dir, repo)
	}
	return rel, nil
}
