package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// env is the real API server of this package's cluster tests (the
// package's only TestMain: commands that talk to a cluster share it).
var env *kubetest.Env

// Every render in these tests checks that it read nothing its input
// fingerprint does not cover (engine/reads): the safety net under skips.
//
// A test marked t.Parallel spends most of its time waiting on the API
// server (a timeout it must run out, a soak, a rollout's health), in
// namespaces of its own, and sets no environment variable (t.Setenv
// refuses a parallel test): the CI facts a command records are given to
// its run alone with withEnv, as TestAWeekOfAFleet does. Go runs such
// tests together after the sequential ones, so their waits overlap:
// CPU-bound tests are left sequential, because two cores are already
// shared with the next package's tests.
func TestMain(m *testing.M) {
	os.Setenv(pipeline.EnvVerifyInputs, "1")
	// The seal key opm creates for its user goes to a directory of this
	// run (in the system's temporary directory: kubetest.Main exits).
	cfg, err := os.MkdirTemp("", "opm-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", cfg)
	kubetest.Main(m, &env)
}

func serviceExists(t *testing.T, ns, name string) bool {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	assert.NilError(t, err)
	return true
}

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func TestApplyCommandText(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `name: "web"`)
	code, out, errOut := runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	got := lines(out)
	assert.DeepEqual(t, got[:3], []string{"secret/web-creds created", "service/web created", "deployment.apps/web created"})
	assert.Equal(t, len(got), 4)
	server := strings.TrimSuffix(env.Config.Host, "/")
	assert.Assert(t, is.Contains(got[3], "release app applied on context opm-test ("+server+"): 3 created, 0 configured, 0 unchanged, 0 pruned, 0 skipped"))
	assert.Assert(t, is.Contains(got[3], "inventory=opm.app."))
	assert.Assert(t, !strings.Contains(out+errOut, "s3cret"), "no Secret value in the output")
	assert.Assert(t, serviceExists(t, ns, "web"))

	code, out, errOut = runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	assert.DeepEqual(t, lines(out)[:3], []string{"secret/web-creds unchanged", "service/web unchanged", "deployment.apps/web unchanged"})

	// Rename without pruning, then prune.
	renamed := deploytest.Values(t, `name: "site"`)
	code, out, errOut = runOpm(t, "apply", "--no-wait", dir, "-f", renamed, "--kubeconfig", env.Kubeconfig, "--no-prune")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, is.Contains(out, "service/web skipped: pruning is off (--no-prune)"))
	assert.Assert(t, serviceExists(t, ns, "web"))

	code, out, errOut = runOpm(t, "prune", dir, "-f", renamed, "--kubeconfig", env.Kubeconfig, "--dry-run")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, is.Contains(out, "service/web deleted (server dry run)"))
	assert.Assert(t, serviceExists(t, ns, "web"))

	code, out, errOut = runOpm(t, "prune", dir, "-f", renamed, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	assert.DeepEqual(t, lines(out)[:3], []string{"deployment.apps/web deleted", "service/web deleted", "secret/web-creds deleted"})
	assert.Assert(t, is.Contains(out, "release app pruned on context opm-test"))
	assert.Assert(t, !serviceExists(t, ns, "web"))
	assert.Assert(t, serviceExists(t, ns, "site"))
}

func TestApplyCommandJSON(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, ``)
	code, out, errOut := runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig, "-o", "json", "--dry-run")
	assert.Equal(t, code, 0, errOut)
	var doc struct {
		Releases []struct {
			Name    string `json:"name"`
			DryRun  bool   `json:"dryRun"`
			Applied []struct {
				Kind, Namespace, Name, Action string
			} `json:"applied"`
			Stale     []any `json:"stale"`
			Pruned    []any `json:"pruned"`
			Skipped   []any `json:"skipped"`
			Resources []any `json:"resources"`
			Inventory struct {
				Name      string   `json:"name"`
				ChangeIDs []string `json:"changeIds"`
			} `json:"inventory"`
		} `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &doc), "stdout is only JSON")
	r := doc.Releases[0]
	assert.Assert(t, r.DryRun)
	assert.Equal(t, len(r.Applied), 3)
	assert.Equal(t, r.Applied[1].Kind, "Service")
	assert.Equal(t, r.Applied[1].Namespace, ns)
	assert.Equal(t, r.Applied[1].Action, "created")
	assert.Equal(t, len(r.Resources), 3)
	assert.Assert(t, r.Stale != nil && r.Pruned != nil && r.Skipped != nil)
	assert.Equal(t, len(r.Inventory.ChangeIDs), 1)
	// Progress goes to stderr when stdout carries JSON.
	assert.Assert(t, is.Contains(errOut, "service/app created (server dry run)"))
	assert.Assert(t, !serviceExists(t, ns, "app"), "dry run created nothing")
}

// kubeconfigAs writes a copy of the test kubeconfig that impersonates user.
func kubeconfigAs(t *testing.T, user string) string {
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	assert.NilError(t, err)
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = user
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	assert.NilError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

// kubeconfigUnreachable writes a kubeconfig whose server refuses connections.
func kubeconfigUnreachable(t *testing.T) string {
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	assert.NilError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = "https://127.0.0.1:1"
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	assert.NilError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

func TestApplyCommandExitCodes(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, ``)
	kc := env.Kubeconfig

	// An object that exists without this release's labels (kubectl create
	// configmap): general failure.
	taken := deploytest.Dir(t, ns, `name: "taken"`)
	_, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().ConfigMaps(ns).Create(t.Context(),
		configMap("taken-config"), metav1.CreateOptions{FieldManager: "kubectl-create"})
	assert.NilError(t, err)
	takenValues := deploytest.Values(t, `config: {a: "b"}`)

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"bad output", []string{"apply", "--no-wait", dir, "-o", "yaml"}, 2, "-o must be text or json"},
		{"bad max history", []string{"apply", "--no-wait", dir, "--max-history", "0"}, 2, "--max-history must be at least 1"},
		{"unknown flag", []string{"apply", "--no-wait", dir, "--frobnicate"}, 2, "unknown flag"},
		{"two dirs", []string{"prune", dir, dir}, 2, "accepts at most 1 arg"},
		{"unknown release", []string{"apply", "--no-wait", dir, "-r", "nope", "--kubeconfig", kc}, 2, `release "nope" is not declared`},
		{"unknown context", []string{"apply", "--no-wait", dir, "--kubeconfig", kc, "--context", "nope"}, 3, `context "nope" (--context) is not in`},
		{"unreachable", []string{"apply", "--no-wait", dir, "--kubeconfig", kubeconfigUnreachable(t)}, 3, "127.0.0.1:1"},
		{"forbidden", []string{"apply", "--no-wait", dir, "--kubeconfig", kubeconfigAs(t, "nobody")}, 4, "forbidden"},
		{"prune forbidden", []string{"prune", dir, "--kubeconfig", kubeconfigAs(t, "nobody")}, 4, "forbidden"},
		{"rejected by the API server", []string{"apply", "--no-wait", deploytest.Dir(t, ns, `name: "bad", image: ""`), "--kubeconfig", kc}, 2, "Deployment.apps/" + ns + "/bad"},
		{"untracked object", []string{"apply", "--no-wait", taken, "-f", takenValues, "--kubeconfig", kc}, 1, "ConfigMap/" + ns + "/taken-config already exists but is not tracked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runOpm(t, tc.args...)
			assert.Equal(t, code, tc.code, errOut)
			assert.Assert(t, is.Contains(errOut, tc.message))
		})
	}

	// Exit code 5 (not found) comes from kinds the cluster does not serve,
	// which the catalog cannot render; see engine/objects' tests for the
	// class and main's run for the mapping every class shares.

	// --adopt takes the untracked object over.
	code, out, errOut := runOpm(t, "apply", "--no-wait", taken, "-f", takenValues, "--kubeconfig", kc, "--adopt")
	assert.Equal(t, code, 0, errOut)
	assert.Assert(t, is.Contains(out, "configmap/taken-config configured"))
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "other"}}
}

// Each release's summary follows its own object lines.
func TestApplyCommandSummaryFollowsEachRelease(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: one: {#module: appmodule, metadata: namespace: %[1]q, values: {name: "one", withSecret: false}}
releases: two: {#module: appmodule, metadata: namespace: %[1]q, values: {name: "two", withSecret: false}}
`, ns)})
	code, out, errOut := runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	got := lines(out)
	assert.Equal(t, len(got), 6, out)
	assert.DeepEqual(t, got[:2], []string{"service/one created", "deployment.apps/one created"})
	assert.Assert(t, strings.HasPrefix(got[2], "release one applied on "), got[2])
	assert.DeepEqual(t, got[3:5], []string{"service/two created", "deployment.apps/two created"})
	assert.Assert(t, strings.HasPrefix(got[5], "release two applied on "), got[5])
}
