package kube

import (
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// tunnel forwards TCP connections from listenHost (a random port) to
// target, like the service binding a Dagger function reaches a host's API
// server through. It returns the tunnel's host:port.
func tunnel(t *testing.T, listenHost, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(listenHost, "0"))
	assert.NilError(t, err)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	// Clients keep idle connections open: close them all, then wait.
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			if closed {
				in.Close()
				out.Close()
			}
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); io.Copy(in, out); in.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestPointAtKeepsTLSVerificationThroughATunnel(t *testing.T) {
	isolate(t, "")
	data, err := os.ReadFile(testEnv.Kubeconfig)
	assert.NilError(t, err)
	api, err := url.Parse(testEnv.Config.Host)
	assert.NilError(t, err)
	ip := net.ParseIP(api.Hostname())
	assert.Assert(t, ip != nil && ip.IsLoopback(), "the test cluster's server %s is not a loopback address", api.Host)
	// 127.0.0.2 is loopback on Linux but not in the API server's
	// certificate, like a Dagger service hostname.
	ep := tunnel(t, "127.0.0.2", api.Host)

	out, err := PointAt(data, ep)
	assert.NilError(t, err)
	cfg, err := clientcmd.Load(out)
	assert.NilError(t, err)
	cl := cfg.Clusters[cfg.Contexts[kubetest.ContextName].Cluster]
	assert.Equal(t, cl.Server, "https://"+ep)
	assert.Equal(t, cl.TLSServerName, api.Hostname())

	c, err := Connect(t.Context(), Flags{KubeconfigData: out}, EnvCluster{}, Options{})
	assert.NilError(t, err)
	assert.NilError(t, c.Ping(t.Context()), "the rewritten kubeconfig reaches the API server through the tunnel")

	// Without the server name, the certificate does not match the tunnel's
	// address: what PointAt's tls-server-name is for.
	cl.TLSServerName = ""
	bare, err := clientcmd.Write(*cfg)
	assert.NilError(t, err)
	c, err = Connect(t.Context(), Flags{KubeconfigData: bare}, EnvCluster{}, Options{})
	assert.NilError(t, err)
	err = c.Ping(t.Context())
	assert.Check(t, is.ErrorContains(err, "certificate"))
}

const twoClusters = `apiVersion: v1
kind: Config
clusters:
- name: kind-a
  cluster: {server: "https://127.0.0.1:40001", certificate-authority-data: "Y2E="}
- name: kind-b
  cluster: {server: "https://127.0.0.1:40002", certificate-authority-data: "Y2E=", tls-server-name: "kube.example"}
contexts:
- name: a
  context: {cluster: kind-a, user: u}
- name: b
  context: {cluster: kind-b, user: u}
users:
- name: u
  user: {token: "s3cr3t-token"}
current-context: a
`

func TestPointAtPicksTheClusterByPort(t *testing.T) {
	out, err := PointAt([]byte(twoClusters), "svc-1234.dagger.local:40002")
	assert.NilError(t, err)
	cfg, err := clientcmd.Load(out)
	assert.NilError(t, err)
	assert.Equal(t, cfg.Clusters["kind-a"].Server, "https://127.0.0.1:40001", "the other cluster is untouched")
	assert.Equal(t, cfg.Clusters["kind-a"].TLSServerName, "")
	assert.Equal(t, cfg.Clusters["kind-b"].Server, "https://svc-1234.dagger.local:40002")
	assert.Equal(t, cfg.Clusters["kind-b"].TLSServerName, "kube.example", "an explicit server name is kept")
	assert.Equal(t, cfg.AuthInfos["u"].Token, "s3cr3t-token")

	_, err = PointAt([]byte(twoClusters), "svc-1234.dagger.local:6443")
	assert.Check(t, is.ErrorContains(err, "2 clusters and none has port 6443"))
	assert.Check(t, is.ErrorContains(err, "kind-a (127.0.0.1:40001)"))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Validation))
	assert.Check(t, !strings.Contains(err.Error(), "s3cr3t"))

	_, err = PointAt([]byte(twoClusters), "no-port")
	assert.Check(t, is.ErrorContains(err, `"no-port" is not host:port`))
}

func TestSelfContained(t *testing.T) {
	data, err := os.ReadFile(testEnv.Kubeconfig)
	assert.NilError(t, err)
	assert.NilError(t, SelfContained(data), "the test cluster's kubeconfig inlines everything")
	assert.NilError(t, SelfContained([]byte(twoClusters)))

	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "client.crt", "client.key"} {
		assert.NilError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
	}
	files := `apiVersion: v1
kind: Config
clusters:
- name: minikube
  cluster: {server: "https://127.0.0.1:32771", certificate-authority: "` + filepath.Join(dir, "ca.crt") + `"}
- name: eks
  cluster: {server: "https://eks.example", certificate-authority-data: "Y2E="}
contexts:
- name: minikube
  context: {cluster: minikube, user: minikube}
- name: eks
  context: {cluster: eks, user: eks}
users:
- name: minikube
  user: {client-certificate: "` + filepath.Join(dir, "client.crt") + `", client-key: "` + filepath.Join(dir, "client.key") + `"}
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, prod]
current-context: minikube
`
	err = SelfContained([]byte(files))
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Validation))
	for _, want := range []string{
		`context "eks": user "eks" gets credentials from the program "aws" (exec plugin)`,
		`context "minikube": cluster "minikube" reads its CA from the file ` + filepath.Join(dir, "ca.crt"),
		`context "minikube": user "minikube" reads its client certificate from the file`,
		`context "minikube": user "minikube" reads its client key from the file`,
		"inline the credentials",
		"kubectl config view --minify --flatten --raw",
	} {
		assert.Check(t, is.ErrorContains(err, want))
	}
	assert.Check(t, !strings.Contains(err.Error(), "prod"), "exec arguments are not quoted: %v", err)

	err = SelfContained([]byte("not: [a kubeconfig"))
	assert.Check(t, is.ErrorContains(err, "not a valid kubeconfig"))
}
