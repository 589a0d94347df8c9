package pipeline_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/opmodel/pipeline/internal/kubetest"
)

// env is the real API server this package's cluster tests run against.
var env *kubetest.Env

func TestMain(m *testing.M) {
	var err error
	env, err = kubetest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
