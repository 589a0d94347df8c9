package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// appInTest is a deployment of deploytest.HealthyModule released as app in
// environment test (namespace ns), with values (a CUE struct's body).
func appInTest(t *testing.T, ns, values string) string {
	t.Helper()
	return deploytest.HealthyDir(t, fmt.Sprintf("environments: test: namespace: %q\nreleases: app: {#module: appmodule, values: {%s}}\n", ns, values))
}

// pipeFile is a -f argument as bash's <(…) makes one: /dev/fd/N of a pipe
// holding content, which only its first reader gets.
func pipeFile(t *testing.T, content string) string {
	t.Helper()
	r, w, err := os.Pipe()
	assert.NilError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	_, err = w.WriteString(content) // smaller than a pipe's buffer
	assert.NilError(t, err)
	assert.NilError(t, w.Close())
	return fmt.Sprintf("/dev/fd/%d", r.Fd())
}

// `-f <(sops -d values.yaml)`, as docs/cli.md shows it, works in diff,
// apply and review as in render: a command reads its values files more than
// once, and a pipe is read once, in order with the other files.
func TestValuesFromAPipe(t *testing.T) {
	ns := env.Namespace(t)
	dir := appInTest(t, ns, "")
	gitRepo(t, dir, "app")
	kc := "--kubeconfig=" + env.Kubeconfig
	code, out, errOut := runOpm(t, "apply", "--no-wait", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)

	code, out, errOut = runOpm(t, "diff", dir, "--env", "test", "-r", "app", "-f", pipeFile(t, "stamp: piped\n"), "--exit-code", kc)
	assert.Equal(t, code, 1, "the piped stamp changes the ConfigMap\n%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "piped"), out)

	code, out, errOut = runOpm(t, "apply", "--no-wait", "--dry-run", dir, "--env", "test", "-r", "app", "-f", pipeFile(t, "stamp: piped\n"), kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, !strings.Contains(out, "inputs identical"), out)
	assert.Check(t, is.Contains(out, "configmap/web-config configured"), out)

	// In order: a later regular file wins over the pipe.
	later := deploytest.Values(t, `stamp: "later"`)
	code, out, errOut = runOpm(t, "diff", dir, "--env", "test", "-r", "app", "-f", pipeFile(t, "stamp: piped\n"), "-f", later, kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "later"), out)
	assert.Check(t, !strings.Contains(out, "piped"), out)

	// Both sides of a review merge the same values: nothing differs.
	code, out, errOut = runOpm(t, "review", dir, "--base", "main", "--env", "test", "-r", "app", "-f", pipeFile(t, "stamp: piped\n"), "--exit-code")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
}
