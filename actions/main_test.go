package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/actions/internal/fakegithub"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// The API server is started only by the tests that need one (cluster
// diff, apply); the review tests need no cluster.
var (
	clusterOnce sync.Once
	cluster     *kubetest.Env
	clusterErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

func testCluster(t *testing.T) *kubetest.Env {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterErr = kubetest.Start() })
	assert.NilError(t, clusterErr)
	return cluster
}

// repo is a git repository holding a copy of examples/: main has the base
// commit, the checked-out branch feature the head commits.
type repo struct {
	t    *testing.T
	dir  string
	base string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	err := filepath.WalkDir("../examples", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../examples", p)
		dst := filepath.Join(r.dir, "examples", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	assert.NilError(t, err)
	r.base = r.commit("base: examples as they are")
	r.git("checkout", "-q", "-b", "feature")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	assert.NilError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// edit replaces old with new in examples/file.
func (r *repo) edit(file, old, new string) {
	r.t.Helper()
	p := filepath.Join(r.dir, "examples", file)
	b, err := os.ReadFile(p)
	assert.NilError(r.t, err)
	assert.Assert(r.t, bytes.Contains(b, []byte(old)), "%s does not contain %q", file, old)
	assert.NilError(r.t, os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644))
}

func (r *repo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

const token = "ghs_test_token"

// harness runs the Action in-process like a runner would: inputs and
// GITHUB_* in the environment, an event payload file, GITHUB_OUTPUT and
// GITHUB_STEP_SUMMARY files, and the API at GITHUB_API_URL.
type harness struct {
	t      *testing.T
	repo   *repo
	srv    *fakegithub.Server
	env    map[string]string
	stdout bytes.Buffer
	// tee, when set, also gets what a run writes, as it writes it (a test
	// waits on a line there instead of on the clock).
	tee io.Writer
}

// newHarness prepares a run for the event in testdata/events/<event>.json,
// with the payload's commits pointed at the repository's.
func newHarness(t *testing.T, r *repo, eventName, file string) *harness {
	t.Helper()
	srv := fakegithub.New(token)
	t.Cleanup(srv.Close)
	tmp := t.TempDir()
	h := &harness{t: t, repo: r, srv: srv, env: map[string]string{
		"GITHUB_ACTIONS":      "true",
		"GITHUB_EVENT_NAME":   eventName,
		"GITHUB_EVENT_PATH":   filepath.Join(tmp, "event.json"),
		"GITHUB_WORKSPACE":    r.dir,
		"GITHUB_REPOSITORY":   "acme/deploy",
		"GITHUB_API_URL":      srv.URL,
		"GITHUB_SERVER_URL":   "https://github.example",
		"GITHUB_RUN_ID":       "4242",
		"GITHUB_WORKFLOW":     "pr-review",
		"GITHUB_JOB":          "review",
		"GITHUB_OUTPUT":       filepath.Join(tmp, "output"),
		"GITHUB_STEP_SUMMARY": filepath.Join(tmp, "summary.md"),
		"RUNNER_TEMP":         tmp,
		"INPUT_PATH":          "examples",
		"INPUT_GITHUB_TOKEN":  token,
		// The examples' images do not exist: apply tests of everything but
		// the health wait skip it (TestApplyModeWaitsForHealth has it on).
		"INPUT_WAIT": "false",
	}}
	b, err := os.ReadFile(filepath.Join("testdata", "events", file))
	assert.NilError(t, err)
	var payload map[string]any
	assert.NilError(t, json.Unmarshal(b, &payload))
	head := r.git("rev-parse", "HEAD")
	if pr, ok := payload["pull_request"].(map[string]any); ok {
		pr["base"].(map[string]any)["sha"] = r.base
		pr["head"].(map[string]any)["sha"] = head
	}
	if eventName == "push" {
		payload["before"], payload["after"] = r.base, head
	}
	b, err = json.Marshal(payload)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(h.env["GITHUB_EVENT_PATH"], b, 0o644))
	return h
}

// run runs the Action once, fresh output files and all, and returns its error.
// runErr is run for a goroutine of its own: it fails nothing itself
// (t.FailNow belongs to the test's goroutine) and returns every error.
func (h *harness) runErr() error {
	h.stdout.Reset()
	for _, f := range []string{"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"} {
		if err := os.WriteFile(h.env[f], nil, 0o644); err != nil {
			return err
		}
	}
	var w io.Writer = &h.stdout
	if h.tee != nil {
		w = io.MultiWriter(w, h.tee)
	}
	ctx, action, flush := newAction(h.t.Context(), func(k string) string { return h.env[k] }, w)
	err := run(ctx, action, h.srv.Client())
	return errors.Join(err, flush())
}

func (h *harness) run() error {
	h.t.Helper()
	h.stdout.Reset()
	for _, f := range []string{"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"} {
		assert.NilError(h.t, os.WriteFile(h.env[f], nil, 0o644))
	}
	ctx, action, flush := newAction(h.t.Context(), func(k string) string { return h.env[k] }, &h.stdout)
	err := run(ctx, action, h.srv.Client())
	assert.NilError(h.t, flush())
	return err
}

// outputs parses GITHUB_OUTPUT as the runner does (name=value and
// name<<DELIMITER blocks).
func (h *harness) outputs() map[string]string {
	h.t.Helper()
	f, err := os.Open(h.env["GITHUB_OUTPUT"])
	assert.NilError(h.t, err)
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if name, delim, ok := strings.Cut(line, "<<"); ok {
			var val []string
			for sc.Scan() && sc.Text() != delim {
				val = append(val, sc.Text())
			}
			out[name] = strings.Join(val, "\n")
			continue
		}
		if name, val, ok := strings.Cut(line, "="); ok {
			out[name] = val
		}
	}
	assert.NilError(h.t, sc.Err())
	return out
}

func (h *harness) summary() string {
	h.t.Helper()
	b, err := os.ReadFile(h.env["GITHUB_STEP_SUMMARY"])
	assert.NilError(h.t, err)
	return string(b)
}

// ours returns the comments on the pull request that the Action wrote.
func (h *harness) ours(number int) []fakegithub.Comment {
	var out []fakegithub.Comment
	for _, c := range h.srv.Comments(number) {
		if c.Login == "github-actions[bot]" && strings.Contains(c.Body, "<!-- opm:pr-review:") {
			out = append(out, c)
		}
	}
	return out
}

// writes lists the POST and PATCH requests the server saw.
func (h *harness) writes() []string {
	var out []string
	for _, r := range h.srv.Requests() {
		if strings.HasPrefix(r, "POST ") || strings.HasPrefix(r, "PATCH ") {
			out = append(out, r)
		}
	}
	return out
}

// checkBalanced fails unless every code fence and <details> is closed.
func checkBalanced(t *testing.T, md string) {
	t.Helper()
	fence, depth := "", 0
	for _, line := range strings.Split(md, "\n") {
		if fence != "" {
			if strings.TrimSpace(line) != "" && strings.Trim(line, "`") == "" && len(line) >= len(fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			fence = line[:len(line)-len(strings.TrimLeft(line, "`"))]
			continue
		}
		depth += strings.Count(line, "<details>") - strings.Count(line, "</details>")
		assert.Assert(t, depth >= 0, "a </details> closes nothing")
	}
	assert.Equal(t, fence, "", "a code fence is left open")
	assert.Equal(t, depth, 0, "a <details> is left open")
}

// contains fails when s lacks sub, without printing all of s.
func contains(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		if len(s) > 2000 {
			s = s[:2000] + "…"
		}
		t.Fatalf("missing %q in:\n%s", sub, s)
	}
}
