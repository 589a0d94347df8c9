// Package snapshot reads a deployment directory as one tree — the working
// tree, or the tree at a commit (from git's objects, or a checkout) — so
// that every reader of a side of a review or a rollback (CUE's loader,
// values files, SOPS files, embeds, the fingerprint, the render) sees the
// same files and no other commit's.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/workers"
)

// Snapshot is a deployment directory as one tree: the working tree, or
// the tree at a commit. Every reader of a side of a review — CUE's loader,
// values files in every format, SOPS files, embeds, the fingerprint, the
// render — reads it through the snapshot's directory and overlay, so no
// reader sees another commit's file.
type Snapshot struct {
	// dir is the deployment directory: as given for the working tree,
	// inside a temporary root standing for the repository at a commit.
	dir string
	// overlay holds the CUE files read from git's objects (nil: every
	// file is on disk under dir).
	overlay map[string][]byte
	// tree is the snapshot as already parsed and scanned (a commit's
	// environments are evaluated to find its values files), or nil.
	tree *fingerprint.Tree
	// scanned runs a scan started ahead (ScanAhead); scanErr is its
	// error. nil: none was started.
	scanned *workers.Group
	scanErr error
	// commit is the commit the snapshot is of ("" for the working tree);
	// root is where the repository's files of it are.
	commit, root string
	done         func()
}

// Worktree is dir as it is on disk.
func Worktree(dir string) *Snapshot { return &Snapshot{dir: dir} }

// Dir is the deployment directory: as given for the working tree, inside
// a temporary root standing for the repository at a commit.
func (s *Snapshot) Dir() string { return s.dir }

// Revision is the commit the snapshot is of, "" for the working tree.
func (s *Snapshot) Revision() string { return s.commit }

// Root is where the repository's files of the commit are ("" for the
// working tree).
func (s *Snapshot) Root() string { return s.root }

// Close removes what the snapshot wrote (a commit's files or worktree).
func (s *Snapshot) Close() {
	s.Wait()
	if s != nil && s.done != nil {
		s.done()
		s.done = nil
	}
}

// Absent reports whether the snapshot has no deployment: no directory,
// or one that is not a CUE module (no cue.mod/module.cue on disk or in the
// overlay) — the base of the first pull request of a repository, which
// holds a README at most. Such a side is empty: everything is added.
func (s *Snapshot) Absent() bool {
	if s.dir == "" {
		return true
	}
	abs, err := filepath.Abs(s.dir)
	if err != nil {
		return false // the load says what is wrong
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return true
	}
	modFile := filepath.Join(abs, "cue.mod", "module.cue")
	if _, ok := s.overlay[modFile]; ok {
		return false
	}
	_, err = os.Stat(modFile)
	return errors.Is(err, os.ErrNotExist)
}

// Scan parses the snapshot without evaluating it, once: the fingerprint
// tree every skip and cache lookup of its releases reads. envCache is
// where evaluated environments are kept between runs.
func (s *Snapshot) Scan(ctx context.Context, envCache *cache.Cache) (*fingerprint.Tree, error) {
	if s.scanned != nil {
		s.scanned.Wait()
		return s.tree, s.scanErr
	}
	if s.tree != nil {
		return s.tree, nil
	}
	t, err := s.parse(ctx, envCache)
	if err != nil {
		return nil, err
	}
	s.tree = t
	return t, nil
}

// ScanAhead starts the scan on a goroutine of its own: a review parses
// its head while it reads and parses its base, which on two cores takes
// the parse of the smaller side off the review's time (the head of a
// 200-module monorepo alone is a tenth of a one-module change's review).
// CUE's loader runs concurrently in separate loads (engine/render does
// the same, under make race). Every later scan waits for it.
func (s *Snapshot) ScanAhead(ctx context.Context, envCache *cache.Cache) {
	if s.scanned != nil || s.tree != nil {
		return
	}
	s.scanned = &workers.Group{}
	s.scanned.Go(func() {
		s.tree, s.scanErr = s.parse(ctx, envCache)
	})
}

// Wait returns when a scan started ahead is done.
func (s *Snapshot) Wait() {
	if s != nil && s.scanned != nil {
		s.scanned.Wait()
	}
}

// parse parses and scans the snapshot's files.
func (s *Snapshot) parse(ctx context.Context, envCache *cache.Cache) (*fingerprint.Tree, error) {
	p, err := load.ParseImports(ctx, s.dir, s.overlay)
	if err != nil {
		return nil, err
	}
	t, err := fingerprint.Scan(ctx, p)
	if err != nil {
		return nil, err
	}
	t.UseCache(envCache)
	return t, nil
}

// Load evaluates the snapshot, pruned to what pruned keeps (nil: all).
func (s *Snapshot) Load(ctx context.Context, pruned map[string][]byte) (*load.Deployment, error) {
	return load.LoadWith(ctx, s.dir, load.Options{Overlay: s.overlay, Pruned: pruned})
}

// PrunedTo is the root that evaluates only releases (and what they read).
func (s *Snapshot) PrunedTo(ctx context.Context, releases []string) map[string][]byte {
	return fingerprint.PrunedRoot(ctx, s.dir, releases, s.overlay)
}

// EnvironmentsOnly is the root that evaluates only the environments.
func (s *Snapshot) EnvironmentsOnly(ctx context.Context) map[string][]byte {
	return fingerprint.EnvironmentsRoot(ctx, s.dir, s.overlay)
}

// Commit is the deployment directory dir (inside repo) as of
// commit. read: from git's objects (the CUE files in memory, the few
// others written to a temporary root), which in a repository of many
// modules is a small part of a checkout; its environments are evaluated
// once to find the values files they name outside dir. Otherwise, or when
// the commit cannot be read that way (its environments do not evaluate,
// a values file is reached through a symbolic link), a checkout: it
// reproduces what reading objects cannot.
func Commit(ctx context.Context, repo, dir, commit string, read bool, envCache *cache.Cache) (*Snapshot, error) {
	if read {
		s, err := readCommit(ctx, repo, dir, commit)
		if err == nil {
			if err = s.completeValues(ctx, repo, envCache); err == nil {
				return s, nil
			}
		}
		s.Close()
	}
	return Checkout(ctx, repo, dir, commit)
}

// readCommit reads dir as of commit from git's object store
// (gitref.ReadFiles) into a temporary root: its CUE files stay in memory,
// an overlay for CUE's loader; only the others (values files, cue.mod) are
// written.
func readCommit(ctx context.Context, repo, dir, commit string) (*Snapshot, error) {
	rel, err := relPath(repo, dir)
	if err != nil {
		return &Snapshot{}, err
	}
	files, err := gitref.ReadFiles(ctx, repo, commit, filepath.ToSlash(rel))
	if err != nil {
		return &Snapshot{}, err
	}
	root, err := os.MkdirTemp("", "opm-base-")
	if err != nil {
		return &Snapshot{}, fmt.Errorf("reading the base: %w", err)
	}
	s := &Snapshot{dir: filepath.Join(root, rel), overlay: map[string][]byte{}, commit: commit, root: root,
		done: func() { _ = os.RemoveAll(root) }}
	for p, b := range files {
		abs := filepath.Join(root, filepath.FromSlash(p))
		inMod := strings.HasPrefix(filepath.ToSlash(strings.TrimPrefix(abs, s.dir+string(filepath.Separator))), "cue.mod/")
		if strings.HasSuffix(p, ".cue") && !inMod {
			s.overlay[abs] = b
			continue
		}
		if err := writeFile(abs, b); err != nil {
			return s, err
		}
	}
	if len(files) > 0 {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return s, fmt.Errorf("reading the base: %w", err)
		}
	}
	return s, nil
}

// completeValues makes a snapshot read from git's objects what a checkout
// would be for the render: the values files its environments name outside
// the deployment directory, inside the repository, are read from git and
// written where a checkout puts them. Its cost follows those files, not
// the repository. An error means the commit cannot be read this way.
func (s *Snapshot) completeValues(ctx context.Context, repo string, envCache *cache.Cache) error {
	if _, err := os.Stat(s.dir); errors.Is(err, os.ErrNotExist) {
		return nil // a new deployment: nothing to read
	}
	t, err := s.Scan(ctx, envCache)
	if err != nil {
		return err
	}
	envs, ok := t.Environments(ctx)
	if !ok {
		return fmt.Errorf("the base's environments cannot be evaluated")
	}
	var outside []string
	for _, env := range envs {
		files, err := t.ValuesFiles(ctx, env)
		if err != nil {
			return err
		}
		for _, f := range files {
			if rel, ok := s.outsideDir(f); ok {
				outside = append(outside, rel)
			}
		}
	}
	got, err := gitref.ReadPaths(ctx, repo, s.commit, outside)
	if err != nil {
		return err
	}
	for _, rel := range outside {
		if _, ok := got[rel]; !ok {
			// Missing from git's objects: the commit lacks it, or reaches
			// it through a symbolic link (shared-link/values.yaml), which
			// only a checkout resolves. The checkout tells which.
			return fmt.Errorf("values file %s is not a plain file at %s", rel, s.commit)
		}
	}
	for rel, b := range got {
		if err := writeFile(filepath.Join(s.root, filepath.FromSlash(rel)), b); err != nil {
			return err
		}
	}
	return nil
}

// outsideDir is a values file's path in the repository when it is
// outside the deployment directory but inside the repository (ok false:
// readCommit wrote it, or it is outside the repository and so the same
// file for both sides).
func (s *Snapshot) outsideDir(file string) (string, bool) {
	abs := file
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(s.dir, file)
	}
	if inDir, err := filepath.Rel(s.dir, abs); err == nil && !strings.HasPrefix(inDir, "..") {
		return "", false
	}
	inRepo, err := filepath.Rel(s.root, abs)
	if err != nil || strings.HasPrefix(inRepo, "..") {
		return "", false
	}
	return filepath.ToSlash(inRepo), true
}

func writeFile(abs string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fmt.Errorf("reading the base: %w", err)
	}
	if err := os.WriteFile(abs, b, 0o644); err != nil {
		return fmt.Errorf("reading the base: %w", err)
	}
	return nil
}

// Checkout checks commit of repo out into a temporary worktree:
// dir (inside repo) is where the deployment directory is inside it.
func Checkout(ctx context.Context, repo, dir, commit string) (*Snapshot, error) {
	rel, err := relPath(repo, dir)
	if err != nil {
		return nil, err
	}
	wt, err := gitref.Checkout(ctx, repo, commit)
	if err != nil {
		return nil, err
	}
	return &Snapshot{dir: filepath.Join(wt.Dir, rel), commit: commit, root: wt.Dir,
		done: func() { _ = wt.Close(context.WithoutCancel(ctx)) }}, nil
}

// ResolveFirst returns the first of refs that names a commit in repo.
// None is a not-found error listing every ref tried.
func ResolveFirst(ctx context.Context, repo string, refs []string) (ref, commit string, err error) {
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
