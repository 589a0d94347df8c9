package pipeline_test

import (
	"os"
	"testing"

	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// env is the real API server this package's cluster tests run against.
var env *kubetest.Env

// Every render in these tests checks that it read nothing its input
// fingerprint does not cover (engine/reads), and every skip is checked
// against a full render (OPM_VERIFY_SKIPS): fast path against full path
// on every scenario the package tests.
func TestMain(m *testing.M) {
	os.Setenv(pipeline.EnvVerifyInputs, "1")
	os.Setenv(pipeline.EnvVerifySkips, "1")
	kubetest.Main(m, &env)
}
