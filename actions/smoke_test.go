package main

import (
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// smokeComments are the Action's smoke-test comments on the pull request.
func (h *harness) smokeComments() []string {
	var out []string
	for _, c := range h.srv.Comments(prNumber) {
		if c.Login == "github-actions[bot]" && strings.Contains(c.Body, "<!-- opm:smoke:") {
			out = append(out, c.Body)
		}
	}
	return out
}

func TestSmokeMode(t *testing.T) {
	env := testCluster(t)
	b, err := os.ReadFile(env.Kubeconfig)
	assert.NilError(t, err)
	kubeconfig := string(b)
	dir := deploytest.HealthyDir(t, `
environments: dev: namespace: "dev"
environments: broken: {namespace: "broken", values: broken: true}
releases: app: #module: appmodule
`)
	h := newHarness(t, newRepo(t), "pull_request", "pull_request.json")
	h.env["INPUT_MODE"] = "smoke"
	h.env["INPUT_PATH"] = dir
	h.env["INPUT_KUBECONFIG"] = kubeconfig
	h.env["INPUT_ENVIRONMENTS"] = "dev"
	h.env["INPUT_TIMEOUT"] = "2s"

	assert.NilError(t, h.run())
	got := h.smokeComments()
	assert.Equal(t, len(got), 1)
	contains(t, got[0], "<!-- opm:smoke:pr-review/review/dev -->")
	contains(t, got[0], "## opm smoke test: dev")
	contains(t, got[0], "✅ **Passed.**")
	checkBalanced(t, got[0])
	assert.Equal(t, len(h.ours(prNumber)), 0, "the review's comment is not the smoke test's")
	contains(t, h.summary(), "✅ **Passed.**")
	assert.Assert(t, h.outputs()["comment-url"] != "")
	log := h.stdout.String()
	contains(t, log, "::group::smoke test (dev)")
	contains(t, log, "smoke app: clean passed")
	checkNoKubeconfig(t, h, kubeconfig)

	// The next push updates the same comment.
	assert.NilError(t, h.run())
	assert.Equal(t, len(h.smokeComments()), 1, "updated, not added")

	// A release that never becomes healthy fails the step, after its own
	// comment (one per workflow, job and environments) says why.
	h.env["INPUT_ENVIRONMENTS"] = "broken"
	err = h.run()
	assert.ErrorContains(t, err, "smoke test failed for app/broken (healthy)")
	got = h.smokeComments()
	assert.Equal(t, len(got), 2)
	contains(t, got[1], "<!-- opm:smoke:pr-review/review/broken -->")
	contains(t, got[1], "❌ **Failed.**")
	contains(t, got[1], "| app | broken |")
	contains(t, got[1], "**Not healthy:**")
	checkBalanced(t, got[1])
	contains(t, h.summary(), "❌ **Failed.**")
	checkNoKubeconfig(t, h, kubeconfig)

	// Every throwaway namespace is gone or going.
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	nss, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: pipeline.SmokeNamespaceLabel})
	assert.NilError(t, err)
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "opm-smoke-app-") {
			assert.Check(t, ns.DeletionTimestamp != nil, "namespace %s is left", ns.Name)
		}
	}
}

func TestSmokeModeInputErrors(t *testing.T) {
	h := newHarness(t, newRepo(t), "pull_request", "pull_request.json")
	h.env["INPUT_MODE"] = "smoke"
	h.env["INPUT_TIMEOUT"] = "soon"
	assert.ErrorContains(t, h.run(), `input timeout must be a duration such as 5m, not "soon"`)
}
