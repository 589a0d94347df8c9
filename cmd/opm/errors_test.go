package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"
)

// The mistakes a newcomer makes first, and what opm answers, word for
// word (testdata/errors.golden; `go test ./cmd/opm -run TestErrorsAsWritten
// -update` rewrites it): a change to any of these messages shows in review.
// Each says where, what, and what to do next.
func TestErrorsAsWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deploy")
	reviewCopyTree(t, filepath.Join(repoRoot, "examples"), dir)
	write := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	wrongType := write("wrong-type.yaml", "replicas: \"3\"\n")
	typo := write("typo.yaml", "replica: 3\n")
	badLevel := write("bad-level.yaml", "logLevel: verbose\n")
	empty := t.TempDir()
	required := filepath.Join(t.TempDir(), "required")
	reviewCopyTree(t, filepath.Join(repoRoot, "examples"), required)
	editFile(t, filepath.Join(required, "releases.cue"), "\t\timage:    \"ghcr.io/example/blog:1.4.2\"\n", "")

	var b strings.Builder
	for _, args := range [][]string{
		{"render", dir, "--env", "stagin"},
		{"render", dir, "--env", "staging", "-r", "blgo"},
		{"render", dir, "--env", "staging", "-r", "blog", "-f", "values/missing.yaml"},
		{"render", dir, "--env", "staging", "-r", "blog", "-f", wrongType},
		{"render", dir, "--env", "staging", "-r", "blog", "-f", typo},
		{"render", dir, "--env", "staging", "-r", "blog", "-f", badLevel},
		{"render", required, "--env", "staging", "-r", "blog"},
		{"render", empty},
		{"render", filepath.Join(dir, "modules")},
		{"render", dir, "-o", "toml"},
		{"diff", dir, "--env", "staging", "--color", "sometimes"},
	} {
		code, out, errOut := runOpm(t, args...)
		assert.Assert(t, code != 0, "opm %v succeeded:\n%s", args, out)
		line := strings.Join(args, " ")
		text := fmt.Sprintf("$ opm %s\nexit %d\n%s\n", line, code, errOut)
		for old, new := range map[string]string{dir: "DEPLOY", required: "REQUIRED", empty: "EMPTY", filepath.Dir(wrongType): "FILES", filepath.Dir(typo): "FILES", filepath.Dir(badLevel): "FILES"} {
			text = strings.ReplaceAll(text, old, new)
		}
		b.WriteString(text)
	}
	golden.Assert(t, b.String(), "errors.golden")
}

// reviewCopyTree copies the directory from into to.
func reviewCopyTree(t *testing.T, from, to string) {
	t.Helper()
	assert.NilError(t, os.CopyFS(to, os.DirFS(from)))
}

// panicReader panics on the first read: a bug reached while a command runs.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("boom at the reader") }

// A panic is recovered at the front door: one line through the redactor,
// exit code 1, no Go stack trace on the user's terminal.
func TestPanicIsRecoveredAtTheFrontDoor(t *testing.T) {
	var out, errOut bytes.Buffer
	code := runWithInput(t.Context(), []string{"render", "../../examples", "--env", "staging", "-r", "blog", "-f", "-"}, panicReader{}, &out, &errOut)
	assert.Equal(t, code, 1, errOut.String())
	assert.Check(t, strings.Contains(errOut.String(), "Error: opm failed on an internal error (a bug; please report it with the command you ran): boom at the reader"), errOut.String())
	assert.Check(t, !strings.Contains(errOut.String(), "goroutine"), errOut.String())
}
