package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// smokeCLIDir is a deployment of deploytest.HealthyModule with environment
// "prod" pinned to kubeContext and environment "dev" whose release never
// becomes healthy.
func smokeCLIDir(t *testing.T, kubeContext string) string {
	return deploytest.HealthyDir(t, `
environments: prod: {namespace: "prod", cluster: kubeContext: "`+kubeContext+`"}
environments: dev: {namespace: "dev", values: broken: true}
releases: app: #module: appmodule
`)
}

func smokeNamespaces(t *testing.T, prefix string) []string {
	cs := kubernetes.NewForConfigOrDie(env.Config)
	list, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: pipeline.SmokeNamespaceLabel})
	assert.NilError(t, err)
	var out []string
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, prefix) {
			out = append(out, ns.Name)
		}
	}
	return out
}

func TestSmokeRefusesAnEnvironmentsOwnCluster(t *testing.T) {
	// By name: the kubeconfig's current context is prod's kubeContext.
	dir := smokeCLIDir(t, kubetest.ContextName)
	prefix := "smoke-refuse-name"
	code, _, errOut := runOpm(t, "smoke", dir, "--env", "prod", "--kubeconfig", env.Kubeconfig, "--namespace-prefix", prefix)
	assert.Equal(t, code, 2, errOut)
	assert.Check(t, is.Contains(errOut, `refusing to smoke-test release app on context "`+kubetest.ContextName+`"`))
	assert.Check(t, is.Contains(errOut, "--i-know-this-is-a-real-cluster"))
	assert.Check(t, is.Len(smokeNamespaces(t, prefix), 0), "nothing was created")

	// By server: prod's context "production" and the current context
	// "throwaway" are the same cluster under two names.
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	assert.NilError(t, err)
	orig := kc.Contexts[kc.CurrentContext]
	prodCtx, throwCtx := *orig, *orig
	kc.Contexts = map[string]*clientcmdapi.Context{"production": &prodCtx, "throwaway": &throwCtx}
	kc.CurrentContext = "throwaway"
	twoNames := filepath.Join(t.TempDir(), "kubeconfig")
	assert.NilError(t, clientcmd.WriteToFile(*kc, twoNames))
	dir = smokeCLIDir(t, "production")
	prefix = "smoke-refuse-server"
	code, _, errOut = runOpm(t, "smoke", dir, "--env", "prod", "--kubeconfig", twoNames, "--namespace-prefix", prefix)
	assert.Equal(t, code, 2, errOut)
	assert.Check(t, is.Contains(errOut, `its server is that of environment "prod"'s own kubeContext "production"`))
	assert.Check(t, is.Len(smokeNamespaces(t, prefix), 0), "nothing was created")

	// Told it is fine, it runs (and passes) on that cluster.
	code, out, errOut := runOpm(t, "smoke", dir, "--env", "prod", "--kubeconfig", twoNames, "--namespace-prefix", prefix, "--i-know-this-is-a-real-cluster", "-o", "json")
	assert.Equal(t, code, 0, "%s\n%s", out, errOut)
	var res pipeline.SmokeResult
	assert.NilError(t, json.Unmarshal([]byte(out), &res))
	assert.Check(t, res.Passed)
	assert.Equal(t, res.Cluster.Context, "throwaway")
	assert.Check(t, is.Contains(errOut, "smoke app: clean passed"))
	for _, ns := range smokeNamespaces(t, prefix) {
		t.Cleanup(func() {
			_ = kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{})
		})
	}
}

func TestSmokeExitCodes(t *testing.T) {
	dir := smokeCLIDir(t, "production")
	prefix := "smoke-cli-broken"
	code, out, errOut := runOpm(t, "smoke", dir, "--env", "dev", "--kubeconfig", env.Kubeconfig, "--namespace-prefix", prefix, "--timeout", "2s", "-o", "markdown")
	assert.Equal(t, code, 1, "a failed check\n%s\n%s", out, errOut)
	assert.Check(t, is.Contains(out, "❌ **Failed.**"))
	assert.Check(t, is.Contains(out, "| app | dev |"))
	for _, ns := range smokeNamespaces(t, prefix) {
		t.Cleanup(func() {
			_ = kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{})
		})
	}

	code, _, errOut = runOpm(t, "smoke", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 2, "no --env: %s", errOut)
	code, _, errOut = runOpm(t, "smoke", dir, "--env", "nope", "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 2, "unknown environment: %s", errOut)
	assert.Check(t, is.Contains(errOut, `environment "nope" is not declared`))
	code, _, errOut = runOpm(t, "smoke", dir, "--env", "dev", "--kubeconfig", env.Kubeconfig, "--context", "nope")
	assert.Equal(t, code, 3, "unknown context: %s", errOut)
}
