package gitref

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNotPlain is returned by ReadFiles for a tree holding symbolic links
// or submodules, which only a checkout reproduces.
var ErrNotPlain = errors.New("the tree holds symbolic links or submodules")

// ReadFiles returns the files under dir (a path relative to the
// repository root, "" for all) at commit, read from git's object store and
// keyed by their path relative to the repository root. Nothing is written
// to disk, so a review's base costs what it reads, not a checkout of the
// repository. A checkout may change what it writes (smudge filters such
// as Git LFS, end-of-line conversion): where the repository can (a
// .gitattributes in the tree, attributes configured, core.autocrlf or
// core.eol set, a user's or the system's attributes file), ReadFiles
// returns ErrNotPlain and the caller checks out.
func ReadFiles(ctx context.Context, repo, commit, dir string) (map[string][]byte, error) {
	var pathspecs []string
	if dir != "" && dir != "." {
		pathspecs = []string{strings.TrimSuffix(dir, "/") + "/"}
	}
	return readFiles(ctx, repo, commit, dir, pathspecs, nil)
}

// ReadPaths is ReadFiles for the given files (paths relative to the
// repository root); a path that does not exist at commit is left out.
// A review reads the values files its base's environments name beside
// the deployment directory this way: what it costs follows them, not
// the repository's size.
func ReadPaths(ctx context.Context, repo, commit string, paths []string) (map[string][]byte, error) {
	if len(paths) == 0 {
		return map[string][]byte{}, nil
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	// Pathspecs may match more than the paths (a "*" in a name): keep
	// exactly the paths asked for.
	return readFiles(ctx, repo, commit, strings.Join(paths, ", "), paths, func(p string) bool { return want[p] })
}

func readFiles(ctx context.Context, repo, commit, what string, pathspecs []string, keep func(string) bool) (map[string][]byte, error) {
	if filtered(ctx, repo, commit) {
		return nil, ErrNotPlain
	}
	args := append([]string{"ls-tree", "-r", "-z", "--full-tree", commit, "--"}, pathspecs...)
	list, err := gitBytes(ctx, repo, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("listing %s at %s: %w", what, Short(commit), err)
	}
	var paths []string
	for _, rec := range bytes.Split(list, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, path, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			return nil, fmt.Errorf("listing %s at %s: unexpected line %q", what, Short(commit), rec)
		}
		if keep != nil && !keep(string(path)) {
			continue
		}
		fields := strings.Fields(string(meta))
		if len(fields) != 3 || fields[1] != "blob" || fields[0] == "120000" {
			return nil, ErrNotPlain
		}
		paths = append(paths, string(path))
	}
	out := make(map[string][]byte, len(paths))
	if len(paths) == 0 {
		return out, nil
	}
	var in bytes.Buffer
	for _, p := range paths {
		if strings.ContainsAny(p, "\n") {
			return nil, ErrNotPlain
		}
		fmt.Fprintf(&in, "%s:%s\n", commit, p)
	}
	raw, err := gitBytes(ctx, repo, &in, "cat-file", "--batch")
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", what, Short(commit), err)
	}
	r := bufio.NewReader(bytes.NewReader(raw))
	for _, p := range paths {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", p, Short(commit), err)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("reading %s at %s: %s", p, Short(commit), strings.TrimSpace(header))
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("reading %s at %s: %q", p, Short(commit), header)
		}
		b := make([]byte, size+1) // the content and its trailing newline
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", p, Short(commit), err)
		}
		out[p] = b[:size]
	}
	return out, nil
}

// filtered reports whether a checkout of commit could write other bytes
// than the objects hold.
func filtered(ctx context.Context, repo, commit string) bool {
	for _, key := range []string{"core.autocrlf", "core.eol", "core.attributesFile"} {
		if v, err := git(ctx, repo, "config", "--get", key); err == nil && v != "" && v != "false" {
			return true
		}
	}
	// Attributes git reads without being configured to: the user's
	// ($XDG_CONFIG_HOME/git/attributes, ~/.config/git/attributes) and the
	// system's (/etc/gitattributes, unless GIT_ATTR_NOSYSTEM).
	var global []string
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		global = append(global, filepath.Join(x, "git", "attributes"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		global = append(global, filepath.Join(home, ".config", "git", "attributes"))
	}
	if os.Getenv("GIT_ATTR_NOSYSTEM") == "" {
		global = append(global, "/etc/gitattributes")
	}
	for _, f := range global {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			return true
		}
	}
	if gitDir, err := git(ctx, repo, "rev-parse", "--git-common-dir"); err == nil {
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(repo, gitDir)
		}
		if _, err := os.Stat(filepath.Join(gitDir, "info", "attributes")); err == nil {
			return true
		}
	}
	names, err := gitBytes(ctx, repo, nil, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit)
	if err != nil {
		return true
	}
	for _, n := range bytes.Split(names, []byte{0}) {
		if filepath.Base(string(n)) == ".gitattributes" {
			return true
		}
	}
	return false
}

// gitBytes runs git in dir with stdin and returns stdout untrimmed.
func gitBytes(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	// No hooks: a checkout must not run code from the repository.
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "core.hooksPath=" + os.DevNull}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	return stdout.Bytes(), nil
}
