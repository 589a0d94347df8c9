package pipeline_test

import (
	"os"
	"testing"

	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// env is the real API server this package's cluster tests run against,
// started by the first test that asks for it: the tests that need no
// cluster (about half of the package's) run without the Kubernetes
// binaries, and the control plane is started once for all the others.
var env = &kubetest.Lazy{}

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
	kubetest.MainLazy(m, env)
}
