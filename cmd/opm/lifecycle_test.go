package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// diff, status and delete through the CLI: flags, outputs and exit codes.
func TestDiffStatusDeleteCommands(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `secret: "old-secret-value"`)
	kc := []string{"--kubeconfig", env.Kubeconfig}
	args := func(a ...string) []string { return append(a, kc...) }

	code, _, errOut := runOpm(t, args("diff", dir, "--exit-code")...)
	assert.Equal(t, code, 1, "not applied yet: differences\n%s", errOut)

	code, _, errOut = runOpm(t, args("apply", "--no-wait", dir)...)
	assert.Equal(t, code, 0, errOut)

	code, out, errOut := runOpm(t, args("diff", dir, "--exit-code")...)
	assert.Equal(t, code, 0, "applied: no differences\n%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "0 added, 0 modified, 3 unchanged, 0 stale, 0 ghost"))

	changed := deploytest.Values(t, `secret: "new-secret-value"`, `name: "renamed"`)
	for _, format := range []string{"text", "json", "markdown"} {
		code, out, errOut = runOpm(t, args("diff", dir, "-f", changed, "-o", format, "--exit-code")...)
		assert.Equal(t, code, 1, "%s: differences\n%s", format, errOut)
		for _, v := range []string{"old-secret-value", "new-secret-value"} {
			assert.Check(t, !strings.Contains(out, v), "%s output shows a Secret value", format)
			assert.Check(t, !strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(v))), "%s output shows a Secret value in base64", format)
		}
		assert.Check(t, is.Contains(out, "renamed"), format)
	}
	code, out, _ = runOpm(t, args("diff", dir, "-f", changed, "-o", "json")...)
	assert.Equal(t, code, 0, "without --exit-code, differences are success")
	var cs struct {
		Counts struct{ Added, Stale int }
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &cs))
	assert.Equal(t, cs.Counts.Added, 3)
	assert.Equal(t, cs.Counts.Stale, 3)

	code, out, _ = runOpm(t, args("status", dir)...)
	assert.Equal(t, code, 1, "the Deployment is not ready (its image never pulls)")
	assert.Check(t, is.Contains(out, "Discovery:   inventory"))
	assert.Check(t, is.Contains(out, "InProgress"))
	code, out, _ = runOpm(t, args("status", "--name", "app", "-n", ns, "-o", "json")...)
	assert.Equal(t, code, 1)
	var st struct {
		Healthy  bool
		Releases []struct{ Name, ReleaseID string }
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, st.Releases[0].Name, "app")

	code, out, errOut = runOpm(t, args("delete", "--release-id", st.Releases[0].ReleaseID, "-n", ns)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "deleted 3 object(s)"))
	code, out, errOut = runOpm(t, args("delete", "--name", "app", "-n", ns)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "nothing to delete"))
}

func TestTargetFlagErrors(t *testing.T) {
	kc := "--kubeconfig=" + env.Kubeconfig
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"delete without a target":       {[]string{"delete", kc}, "--namespace with --name or --release-id"},
		"delete name without namespace": {[]string{"delete", "--name", "x", kc}, "--namespace is required"},
		"namespace alone":               {[]string{"status", "-n", "x", kc}, "--name or --release-id"},
		"dir and name":                  {[]string{"status", "some-dir", "--name", "x", "-n", "y", kc}, "not both"},
		"bad status output":             {[]string{"status", "--name", "x", "-n", "y", "-o", "xml", kc}, "-o must be"},
		"bad diff output":               {[]string{"diff", "-o", "yaml", kc}, "-o must be"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runOpm(t, tc.args...)
			assert.Equal(t, code, 2, errOut)
			assert.Check(t, is.Contains(errOut, tc.want))
		})
	}
}

func TestContextMissingIsAConnectivityError(t *testing.T) {
	dir := deploytest.Dir(t, "default", "")
	code, out, errOut := runOpm(t, "diff", dir, "--kubeconfig", env.Kubeconfig, "--context", "nope")
	assert.Equal(t, code, 3, errOut)
	// Said once: under its release (as review does), and counted last.
	assert.Check(t, is.Contains(out, `"nope"`))
	assert.Check(t, is.Contains(errOut, "1 of 1 releases could not be compared (each error is printed above)"))
}

// status --wait on a rollout that cannot finish: the image never pulls
// (the simulated nodes report ImagePullBackOff; a real kubelet cannot
// resolve the registry), so the wait times out, exits 1 and says which
// object is not ready and why. Then the image is fixed and the same wait
// succeeds once the controllers have rolled it out.
func TestStatusWaitTimesOutOnAnImageThatNeverPulls(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `withSecret: false`)
	kc := []string{"--kubeconfig", env.Kubeconfig}
	code, _, errOut := runOpm(t, append([]string{"apply", "--no-wait", dir}, kc...)...)
	assert.Equal(t, code, 0, errOut)

	// The nodes report the pull failure on the pod first; then the wait
	// names it rather than only the Deployment's count.
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	kubetest.WaitForPodReason(t, cs, ns, "ImagePullBackOff")
	code, out, errOut := runOpm(t, append([]string{"status", dir, "--wait", "--timeout", "3s"}, kc...)...)
	assert.Equal(t, code, 1, "%s%s", out, errOut)
	assert.Check(t, is.Contains(errOut, "Error: timed out after 3s waiting for 1 of 2 objects to become Current: "+
		`deployment.apps/app: InProgress (ImagePullBackOff: Back-off pulling image "`+kubetest.FailingImage+`" (pod app-`))
	assert.Check(t, is.Contains(errOut, "container app); Available: 0/1)"))
	assert.Check(t, is.Contains(errOut, "app: deployment.apps/app: InProgress ("), "progress lines on stderr")
	assert.Check(t, !strings.Contains(errOut, "service/app"), "a Service healthy from the start is not a line of progress:\n%s", errOut)
	// Without --wait, status names it too.
	code, out, errOut = runOpm(t, append([]string{"status", dir}, kc...)...)
	assert.Equal(t, code, 1, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "ImagePullBackOff: Back-off pulling image"), out)

	ready := deploytest.Values(t, `image: "`+kubetest.ReadyImage+`"`)
	code, _, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir, "-f", ready}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	code, out, errOut = runOpm(t, append([]string{"status", dir, "-f", ready, "--wait", "--timeout", "1m"}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	// Whether the wait saw the rollout move depends on timing; a line, if
	// any, is the Deployment's, and the table says where it ended.
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		assert.Check(t, l == "" || strings.HasPrefix(l, "app: deployment.apps/app: "), "%q", l)
	}
	assert.Check(t, hasRow(out, "web", "Deployment", "app", "Current"), out)
}

// A deploy job must go red on an image that never pulls, in its own job:
// a single-environment apply waits for health by default (--timeout), says
// what it waits for on stderr, and fails naming what the pods report. The
// same apply of a good image waits and succeeds.
func TestApplyWaitsForHealthByDefault(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `withSecret: false`)
	kc := []string{"--kubeconfig", env.Kubeconfig}
	code, out, errOut := runOpm(t, append([]string{"apply", dir, "--timeout", "20s"}, kc...)...)
	assert.Equal(t, code, 1, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "deployment.apps/app created"), out)
	assert.Check(t, is.Contains(errOut, "waiting up to 20s for releases app to become healthy (--no-wait skips this)"), errOut)
	assert.Check(t, is.Contains(errOut, "releases app applied, but not healthy after 2"), errOut)
	assert.Check(t, is.Contains(errOut, "deployment.apps/app: InProgress ("), errOut)
	assert.Check(t, is.Contains(errOut, "ImagePullBackOff"), "the error names the pods' reason: %s", errOut)

	ready := deploytest.Values(t, `image: "`+kubetest.ReadyImage+`"`)
	code, out, errOut = runOpm(t, append([]string{"apply", dir, "-f", ready, "--timeout", "2m"}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(errOut, "waiting up to 2m0s for releases app to become healthy"), errOut)
}

// An unreachable server, as a newcomer meets it: the error once, under
// its release, and one line on stderr saying how many; none of
// client-go's klog lines (memcache.go "Unhandled Error"), which would
// also bypass the redactor.
func TestUnreachableServerIsSaidOnce(t *testing.T) {
	bin := buildOpm(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	// Port 1 on loopback: nothing listens there.
	assert.NilError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: staging, context: {cluster: c, user: u}}]
current-context: staging
`), 0o600))
	cmd := exec.Command(bin, "diff", "../../examples", "--env", "staging", "--kubeconfig", kc)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	assert.Assert(t, errors.As(err, &exit), "%v", err)
	assert.Equal(t, exit.ExitCode(), 3, stderr.String())
	assert.Check(t, !strings.Contains(stderr.String(), "memcache.go"), stderr.String())
	assert.Check(t, !strings.Contains(stderr.String(), "Unhandled Error"), stderr.String())
	assert.Check(t, strings.Contains(stdout.String(), "connection refused"), stdout.String())
	assert.Check(t, !strings.Contains(stderr.String(), "connection refused"), "the error is said twice:\n%s", stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "2 of 2 releases could not be compared (each error is printed above)"))
}
