package kube

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/opmodel/pipeline/engine/fault"
)

// kubeconfig renders a kubeconfig whose every context points at its own
// server, https://<context>.example:6443, so a test can tell from
// Cluster.Server which file and context were chosen.
func kubeconfig(t *testing.T, current string, contexts ...string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, name := range contexts {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server(name)}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "secret-token-" + name}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	out, err := clientcmd.Write(*cfg)
	assert.NilError(t, err)
	return out
}

func writeKubeconfig(t *testing.T, current string, contexts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	assert.NilError(t, os.WriteFile(path, kubeconfig(t, current, contexts...), 0o600))
	return path
}

func server(context string) string { return "https://" + context + ".example:6443" }

// isolate points the default loading rules at path (or at nothing), so the
// developer's own ~/.kube/config never leaks into a test.
func isolate(t *testing.T, path string) {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "absent")
	}
	t.Setenv(clientcmd.RecommendedConfigPathEnvVar, path)
}

func TestKubeconfigSource(t *testing.T) {
	defaultPath := writeKubeconfig(t, "default-ctx", "default-ctx")
	envPath := writeKubeconfig(t, "env-ctx", "env-ctx")
	flagPath := writeKubeconfig(t, "flag-ctx", "flag-ctx")
	data := kubeconfig(t, "data-ctx", "data-ctx")

	for _, tc := range []struct {
		name        string
		sel         Flags
		env         EnvCluster
		wantContext string
	}{
		{"default loading rules (KUBECONFIG)", Flags{}, EnvCluster{}, "default-ctx"},
		{"environment file over KUBECONFIG", Flags{}, EnvCluster{Name: "dev", KubeConfig: envPath}, "env-ctx"},
		{"flag over environment file", Flags{Kubeconfig: flagPath}, EnvCluster{Name: "dev", KubeConfig: envPath}, "flag-ctx"},
		{"data over flag and environment", Flags{Kubeconfig: flagPath, KubeconfigData: data}, EnvCluster{Name: "dev", KubeConfig: envPath}, "data-ctx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t, defaultPath)
			c, err := Connect(t.Context(), tc.sel, tc.env, Options{})
			assert.NilError(t, err)
			assert.Equal(t, c.Context, tc.wantContext)
			assert.Equal(t, c.Server, server(tc.wantContext))
			assert.Equal(t, c.String(), "context "+tc.wantContext+" ("+server(tc.wantContext)+")")
		})
	}
}

func TestContextChoice(t *testing.T) {
	path := writeKubeconfig(t, "current", "current", "staging", "prod")

	for _, tc := range []struct {
		name        string
		sel         Flags
		env         EnvCluster
		wantContext string
	}{
		{"current context when nothing is named", Flags{Kubeconfig: path}, EnvCluster{}, "current"},
		{"current context when the environment has a cluster file but no context", Flags{}, EnvCluster{Name: "dev", KubeConfig: path}, "current"},
		{"environment context over current", Flags{Kubeconfig: path}, EnvCluster{Name: "staging", KubeContext: "staging"}, "staging"},
		{"flag context over environment context", Flags{Kubeconfig: path, Context: "prod"}, EnvCluster{Name: "staging", KubeContext: "staging"}, "prod"},
		{"flag context even when the environment's is missing", Flags{Kubeconfig: path, Context: "prod"}, EnvCluster{Name: "qa", KubeContext: "qa"}, "prod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t, "")
			c, err := Connect(t.Context(), tc.sel, tc.env, Options{})
			assert.NilError(t, err)
			assert.Equal(t, c.Context, tc.wantContext)
			assert.Equal(t, c.Server, server(tc.wantContext))
		})
	}
}

func TestEnvironmentContextMissingNeverFallsBack(t *testing.T) {
	path := writeKubeconfig(t, "current", "current", "staging")
	isolate(t, path)

	_, err := Connect(t.Context(), Flags{}, EnvCluster{Name: "production", KubeContext: "prod-eu"}, Options{})
	assert.Check(t, is.ErrorContains(err, `environment "production"`))
	assert.Check(t, is.ErrorContains(err, `kubeContext "prod-eu"`))
	assert.Check(t, is.ErrorContains(err, "contexts there: current, staging"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))
}

func TestExplicitContextMissing(t *testing.T) {
	path := writeKubeconfig(t, "current", "current", "staging")
	isolate(t, "")

	_, err := Connect(t.Context(), Flags{Kubeconfig: path, Context: "nope"}, EnvCluster{}, Options{})
	assert.Check(t, is.ErrorContains(err, `context "nope" (--context)`))
	assert.Check(t, is.ErrorContains(err, path))
	assert.Check(t, is.ErrorContains(err, "contexts there: current, staging"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))
}

func TestNoCurrentContext(t *testing.T) {
	path := writeKubeconfig(t, "", "a", "b")
	isolate(t, "")

	_, err := Connect(t.Context(), Flags{Kubeconfig: path}, EnvCluster{}, Options{})
	assert.Check(t, is.ErrorContains(err, "has no current context"))
	assert.Check(t, is.ErrorContains(err, "contexts there: a, b"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))
}

func TestNoKubeconfigAnywhere(t *testing.T) {
	isolate(t, "")

	_, err := Connect(t.Context(), Flags{}, EnvCluster{}, Options{})
	assert.Check(t, is.ErrorContains(err, "no usable kubeconfig"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))
}

func TestNamedKubeconfigMissing(t *testing.T) {
	isolate(t, writeKubeconfig(t, "default-ctx", "default-ctx"))
	missing := filepath.Join(t.TempDir(), "missing")

	// A named file that is absent must not fall back to the default one.
	_, err := Connect(t.Context(), Flags{Kubeconfig: missing}, EnvCluster{}, Options{})
	assert.Check(t, is.ErrorContains(err, missing))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))

	_, err = Connect(t.Context(), Flags{}, EnvCluster{Name: "dev", KubeConfig: missing}, Options{})
	assert.Check(t, is.ErrorContains(err, missing))
	assert.Check(t, is.ErrorContains(err, `environment "dev"`))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))
}

func TestEnvironmentKubeconfigHomeRelative(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	isolate(t, "")
	assert.NilError(t, os.MkdirAll(filepath.Join(home, ".kube"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(home, ".kube", "dev"), kubeconfig(t, "dev", "dev"), 0o600))

	c, err := Connect(t.Context(), Flags{}, EnvCluster{Name: "dev", KubeConfig: "~/.kube/dev"}, Options{})
	assert.NilError(t, err)
	assert.Equal(t, c.Server, server("dev"))
}

func TestKubeconfigDataNeverQuoted(t *testing.T) {
	isolate(t, "")

	// Malformed: the parser's message must not carry the content out.
	bad := []byte("apiVersion: v1\nusers:\n- name: x\n  user:\n    token: hunter2-secret\n   bad: [indent\n")
	_, err := Connect(t.Context(), Flags{KubeconfigData: bad}, EnvCluster{}, Options{})
	assert.Assert(t, err != nil)
	assert.Check(t, !strings.Contains(err.Error(), "hunter2"), "error quotes the kubeconfig: %v", err)
	assert.Check(t, is.ErrorContains(err, "kubeconfig data is not a valid kubeconfig"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))

	// Well-formed but the wrong context: names contexts, not tokens.
	data := kubeconfig(t, "a", "a")
	_, err = Connect(t.Context(), Flags{KubeconfigData: data, Context: "b"}, EnvCluster{}, Options{})
	assert.Assert(t, err != nil)
	assert.Check(t, !strings.Contains(err.Error(), "secret-token"), "error quotes the kubeconfig: %v", err)
	assert.Check(t, is.ErrorContains(err, "contexts there: a"))
}

func TestConnectHonoursCancelledContext(t *testing.T) {
	isolate(t, writeKubeconfig(t, "a", "a"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Connect(ctx, Flags{}, EnvCluster{}, Options{})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestFromConfigRates(t *testing.T) {
	in := &rest.Config{Host: "https://x.example:6443", QPS: 1, Burst: 2}

	c, err := FromConfig(in, "x", Options{})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(c.Config.QPS, float32(1000)))
	assert.Check(t, is.Equal(c.Config.Burst, 2000))
	assert.Check(t, is.Equal(in.QPS, float32(1)), "FromConfig modified its input")

	c, err = FromConfig(in, "x", Options{QPS: 7, Burst: 9})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(c.Config.QPS, float32(7)))
	assert.Check(t, is.Equal(c.Config.Burst, 9))
	assert.Check(t, c.Mapper != nil && c.Discovery != nil && c.Dynamic != nil && c.Clientset != nil)
}

func TestString(t *testing.T) {
	c, err := FromConfig(&rest.Config{Host: "https://127.0.0.1:6443"}, "opm-local", Options{})
	assert.NilError(t, err)
	assert.Equal(t, c.String(), "context opm-local (https://127.0.0.1:6443)")

	c, err = FromConfig(&rest.Config{Host: "https://127.0.0.1:6443"}, "", Options{})
	assert.NilError(t, err)
	assert.Equal(t, c.String(), "https://127.0.0.1:6443")
}

func TestPingUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	addr := l.Addr().String()
	assert.NilError(t, l.Close())

	c, err := FromConfig(&rest.Config{Host: "https://" + addr}, "gone", Options{})
	assert.NilError(t, err)
	err = c.Ping(t.Context())
	assert.Check(t, is.ErrorContains(err, "context gone (https://"+addr+")"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Connectivity))
}
