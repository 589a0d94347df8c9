package pipeline_test

import (
	"testing"

	"github.com/opmodel/pipeline/internal/kubetest"
)

// env is the real API server this package's cluster tests run against.
var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }
