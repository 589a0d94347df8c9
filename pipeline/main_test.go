package pipeline_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// env is the real API server this package's cluster tests run against,
// started by the first test that asks for it: the tests that need no
// cluster (a third of the package's) run without the Kubernetes binaries,
// and the control plane is started once for all the others.
var env = &lazyCluster{}

// lazyCluster starts the control plane on first use.
type lazyCluster struct {
	once, why sync.Once
	e         *kubetest.Env
	err       error
}

func (l *lazyCluster) start() (*kubetest.Env, error) {
	l.once.Do(func() { l.e, l.err = kubetest.Start() })
	return l.e, l.err
}

// Kubeconfig is the kubeconfig file of the cluster. Without one (no
// testing.T at hand: a struct literal's field), it names a file that does
// not exist, so the test fails where it connects, and the reason the
// control plane did not start is printed once.
func (l *lazyCluster) Kubeconfig() string {
	if e, err := l.start(); err == nil {
		return e.Kubeconfig
	}
	l.sayWhy()
	return "/nonexistent/the-control-plane-did-not-start/kubeconfig"
}

// Config is the REST config of the cluster; without one, an address
// nothing listens on (see Kubeconfig).
func (l *lazyCluster) Config() *rest.Config {
	if e, err := l.start(); err == nil {
		return e.Config
	}
	l.sayWhy()
	return &rest.Config{Host: "https://127.0.0.1:1"}
}

// Env is the cluster itself, for the helpers that need the kubetest.Env;
// without one, the test fails.
func (l *lazyCluster) Env(t testing.TB) *kubetest.Env {
	t.Helper()
	e, err := l.start()
	if err != nil {
		t.Fatalf("this test needs a cluster: starting the control plane: %v", err)
	}
	return e
}

func (l *lazyCluster) sayWhy() {
	l.why.Do(func() {
		fmt.Fprintf(os.Stderr, "tests that need a cluster fail: starting the control plane: %v\n", l.err)
	})
}

// Namespace is a namespace of the test's own (kubetest.Env.Namespace).
func (l *lazyCluster) Namespace(t testing.TB) string {
	t.Helper()
	return l.Env(t).Namespace(t)
}

// Controllers reports whether controllers run on the cluster (none
// without one).
func (l *lazyCluster) Controllers() bool {
	e, err := l.start()
	return err == nil && e.Controllers()
}

// stop stops the control plane if a test started it.
func (l *lazyCluster) stop() error {
	if l.e == nil {
		return nil
	}
	return l.e.Stop()
}

// Every render in these tests checks that it read nothing its input
// fingerprint does not cover (engine/reads), and every skip is checked
// against a full render (OPM_VERIFY_SKIPS): fast path against full path
// on every scenario the package tests.
//
// A test marked t.Parallel spends most of its time waiting on the API
// server (a timeout it must run out, a soak, a rollout's health), in
// namespaces of its own, and sets no environment variable (t.Setenv
// refuses a parallel test; the CLI and pipeline read the process's
// environment). Go runs such tests together after the sequential ones,
// so their waits overlap: CPU-bound tests are left sequential, because
// two cores are already shared with the next package's tests.
func TestMain(m *testing.M) {
	os.Setenv(pipeline.EnvVerifyInputs, "1")
	os.Setenv(pipeline.EnvVerifySkips, "1")
	code := m.Run()
	if err := env.stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
