package kubetest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// Lazy is a control plane started by the first test that asks for it
// (MainLazy): a package whose tests mostly need no cluster runs them
// without the Kubernetes binaries, and starts one for all the others.
type Lazy struct {
	once, why sync.Once
	e         *Env
	err       error
}

func (l *Lazy) start() (*Env, error) {
	l.once.Do(func() { l.e, l.err = Start() })
	return l.e, l.err
}

// Kubeconfig is the kubeconfig file of the cluster. Without one (no
// testing.T at hand: a struct literal's field), it names a file that does
// not exist, so the test fails where it connects, and the reason the
// control plane did not start is printed once.
func (l *Lazy) Kubeconfig() string {
	if e, err := l.start(); err == nil {
		return e.Kubeconfig
	}
	l.sayWhy()
	return "/nonexistent/the-control-plane-did-not-start/kubeconfig"
}

// Config is the REST config of the cluster; without one, an address
// nothing listens on (see Kubeconfig).
func (l *Lazy) Config() *rest.Config {
	if e, err := l.start(); err == nil {
		return e.Config
	}
	l.sayWhy()
	return &rest.Config{Host: "https://127.0.0.1:1"}
}

// Env is the cluster itself, for the helpers that need the Env;
// without one, the test fails.
func (l *Lazy) Env(t testing.TB) *Env {
	t.Helper()
	e, err := l.start()
	if err != nil {
		t.Fatalf("this test needs a cluster: starting the control plane: %v", err)
	}
	return e
}

func (l *Lazy) sayWhy() {
	l.why.Do(func() {
		fmt.Fprintf(os.Stderr, "tests that need a cluster fail: starting the control plane: %v\n", l.err)
	})
}

// Namespace is a namespace of the test's own (kubetest.Env.Namespace).
func (l *Lazy) Namespace(t testing.TB) string {
	t.Helper()
	return l.Env(t).Namespace(t)
}

// Controllers reports whether controllers run on the cluster (none
// without one).
func (l *Lazy) Controllers() bool {
	e, err := l.start()
	return err == nil && e.Controllers()
}

// Stop stops the control plane if a test started it.
func (l *Lazy) Stop() error {
	if l.e == nil {
		return nil
	}
	return l.e.Stop()
}

// MainLazy runs the tests with env started on first use, and stops it
// after them when a test did.
func MainLazy(m *testing.M, env *Lazy) {
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
