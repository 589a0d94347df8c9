package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The README's first session runs as written: every `go run ./cmd/opm …`
// line of its quick start, in a clone of the examples whose last commit
// changed something (so `--base HEAD~1` has a base), against the test
// cluster; `make kube-up` and `make kube-down` start and stop the local
// cluster, which the test's own stands in for (bin/kubeconfig is its
// kubeconfig).
func TestReadmeQuickStartRunsAsWritten(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	assert.NilError(t, err)
	var block string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], "go run ./cmd/opm render examples") {
			block = m[1]
		}
	}
	assert.Assert(t, block != "", "the README has no quick start")

	t.Chdir(filepath.Dir(retitledExamples(t)))
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), "staging", metav1.DeleteOptions{}) })

	ran := 0
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		command, _, _ := strings.Cut(line, "#")
		args := strings.Fields(command)
		switch {
		case len(args) == 2 && args[0] == "make" && (args[1] == "kube-up" || args[1] == "kube-down"):
			continue
		case len(args) > 3 && strings.Join(args[:3], " ") == "go run ./cmd/opm":
			args = args[3:]
		default:
			t.Fatalf("the quick start runs %q, which this test does not know", line)
		}
		for i, a := range args {
			if a == "bin/kubeconfig" {
				args[i] = env.Kubeconfig
			}
		}
		code, out, errOut := runOpm(t, args...)
		assert.Equal(t, code, 0, "opm %s:\n%s%s", strings.Join(args, " "), out, errOut)
		ran++
	}
	assert.Check(t, ran >= 5, "ran %d commands", ran)
}
