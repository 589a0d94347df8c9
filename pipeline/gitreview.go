package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/load"
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
	o := opts
	root, baseDir, overlay, done, err := readBase(ctx, repo, dir, base)
	var scanned *fingerprint.Tree
	if err == nil && !opts.NoSkip {
		scanned, err = completeBase(ctx, opts, repo, base, root, baseDir, overlay)
	}
	if err != nil || opts.NoSkip {
		// A checkout reproduces what reading objects cannot (symbolic
		// links, submodules); NoSkip reviews the way it always did.
		if done != nil {
			done()
		}
		if root, baseDir, done, err = checkoutDir(ctx, repo, dir, base); err != nil {
			return nil, err
		}
		overlay, scanned = nil, nil
	}
	defer done()
	o.BaseRefs, o.BaseDir, o.baseOverlay, o.baseTree = nil, baseDir, overlay, scanned
	o.maskScope += "\x00" + base
	cs, err := Review(ctx, o)
	if err != nil {
		return nil, err
	}
	cs.BaseRef, cs.BaseCommit = ref, base
	// Errors and warnings name files by absolute path; relative to the
	// repository they read better and do not show this machine's layout.
	prefixes := []string{repo + string(filepath.Separator), root + string(filepath.Separator)}
	for i := range cs.Releases {
		rc := &cs.Releases[i]
		for _, p := range prefixes {
			rc.Error = strings.ReplaceAll(rc.Error, p, "")
			for j := range rc.Warnings {
				rc.Warnings[j] = strings.ReplaceAll(rc.Warnings[j], p, "")
			}
		}
	}
	return cs, nil
}

// BaseRef is what a base named by a user or a workflow resolves from, in
// order: the ref as given, then the remote-tracking branch of that name
// (a CI checkout often fetches origin/main without a local main).
func BaseRef(ref string) []string { return []string{ref, "origin/" + ref} }

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

// readBase reads the deployment directory dir as of commit from git's
// object store (gitref.ReadFiles) into a temporary directory: its CUE
// files stay in memory, an overlay for CUE's loader; only the others
// (values files, cue.mod) are written, which in a repository of many
// modules is a small part of a checkout. done removes the directory.
func readBase(ctx context.Context, repo, dir, commit string) (root, baseDir string, overlay map[string][]byte, done func(), err error) {
	rel, err := relPath(repo, dir)
	if err != nil {
		return "", "", nil, nil, err
	}
	files, err := gitref.ReadFiles(ctx, repo, commit, filepath.ToSlash(rel))
	if err != nil {
		return "", "", nil, nil, err
	}
	root, err = os.MkdirTemp("", "opm-base-")
	if err != nil {
		return "", "", nil, nil, fmt.Errorf("reading the base: %w", err)
	}
	done = func() { _ = os.RemoveAll(root) }
	baseDir = filepath.Join(root, rel)
	overlay = map[string][]byte{}
	for p, b := range files {
		abs := filepath.Join(root, filepath.FromSlash(p))
		inMod := strings.HasPrefix(filepath.ToSlash(strings.TrimPrefix(abs, baseDir+string(filepath.Separator))), "cue.mod/")
		if strings.HasSuffix(p, ".cue") && !inMod {
			overlay[abs] = b
			continue
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return "", "", nil, done, fmt.Errorf("reading the base: %w", err)
		}
		if err := os.WriteFile(abs, b, 0o644); err != nil {
			return "", "", nil, done, fmt.Errorf("reading the base: %w", err)
		}
	}
	if len(files) > 0 {
		if err := os.MkdirAll(baseDir, 0o755); err != nil {
			return "", "", nil, done, fmt.Errorf("reading the base: %w", err)
		}
	}
	return root, baseDir, overlay, done, nil
}

// completeBase makes a base read from git's objects (readBase) what a
// checkout would be for the render: its environments are evaluated once
// (fingerprint.Tree, which the review then reuses) and the values files
// they name outside the deployment directory, inside the repository, are
// read from git and written where a checkout puts them. Its cost follows
// those files, not the repository. An error means the base cannot be
// read this way (its environments do not evaluate): the caller checks out.
func completeBase(ctx context.Context, opts ReviewOptions, repo, commit, root, baseDir string, overlay map[string][]byte) (*fingerprint.Tree, error) {
	if _, err := os.Stat(baseDir); errors.Is(err, os.ErrNotExist) {
		return nil, nil // a new deployment: nothing to read
	}
	p, err := load.ParseImports(ctx, baseDir, overlay)
	if err != nil {
		return nil, err
	}
	t, err := fingerprint.Scan(ctx, p)
	if err != nil {
		return nil, err
	}
	t.UseCache(opts.cacheDir("environments"))
	envs, ok := t.Environments(ctx)
	if !ok {
		return nil, fmt.Errorf("the base's environments cannot be evaluated")
	}
	var outside []string
	for _, env := range envs {
		files, err := t.ValuesFiles(ctx, env)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			abs := f
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(baseDir, f)
			}
			inDir, err := filepath.Rel(baseDir, abs)
			if err == nil && !strings.HasPrefix(inDir, "..") {
				continue // written by readBase
			}
			inRepo, err := filepath.Rel(root, abs)
			if err != nil || strings.HasPrefix(inRepo, "..") {
				continue // outside the repository: the same file for both sides
			}
			outside = append(outside, filepath.ToSlash(inRepo))
		}
	}
	got, err := gitref.ReadPaths(ctx, repo, commit, outside)
	if err != nil {
		return nil, err
	}
	for _, rel := range outside {
		if _, ok := got[rel]; !ok {
			// Missing from git's objects: the commit lacks it, or reaches
			// it through a symbolic link (shared-link/values.yaml), which
			// only a checkout resolves. The checkout tells which.
			return nil, fmt.Errorf("values file %s is not a plain file at %s", rel, commit)
		}
	}
	for rel, b := range got {
		abs := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("reading the base: %w", err)
		}
		if err := os.WriteFile(abs, b, 0o644); err != nil {
			return nil, fmt.Errorf("reading the base: %w", err)
		}
	}
	return t, nil
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
