package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// chartModule brings the objects of `helm template web ./web` (a chart
// made by `helm create web`) into a module as they are: the chart's own
// labels included. #config.liveness drops the liveness probe.
const chartModule = `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: liveness: *true | bool

let chartLabels = {
	"helm.sh/chart":                "web-0.1.0"
	"app.kubernetes.io/name":       "web"
	"app.kubernetes.io/instance":   "web"
	"app.kubernetes.io/version":    "1.16.0"
	"app.kubernetes.io/managed-by": "Helm"
}
let selector = {"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web"}

#components: web: {
	core.#Objects
	spec: objects: [{
		apiVersion: "v1"
		kind:       "ServiceAccount"
		metadata: {name: "web", labels: chartLabels}
		automountServiceAccountToken: true
	}, {
		apiVersion: "v1"
		kind:       "Service"
		metadata: {name: "web", labels: chartLabels}
		spec: {
			type: "ClusterIP"
			ports: [{port: 80, targetPort: "http", protocol: "TCP", name: "http"}]
			"selector": selector
		}
	}, {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: {name: "web", labels: chartLabels}
		spec: {
			replicas: 1
			"selector": matchLabels: selector
			template: {
				metadata: labels: chartLabels
				spec: {
					serviceAccountName: "web"
					containers: [{
						name:            "web"
						image:           "nginx:1.16.0"
						imagePullPolicy: "IfNotPresent"
						ports: [{name: "http", containerPort: 80, protocol: "TCP"}]
						if #config.liveness {
							livenessProbe: httpGet: {path: "/", port: "http"}
						}
						readinessProbe: httpGet: {path: "/", port: "http"}
					}]
				}
			}
		}
	}]
}
`

// helmInstall writes objects as `helm install web ./web` does: Create
// requests (Update operations in managedFields) by the manager "helm",
// with Helm's annotations and without opm's labels, plus Helm's release
// Secret.
func helmInstall(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, u := range objs {
		labels := map[string]string{}
		for k, v := range u.GetLabels() {
			if strings.HasPrefix(k, "app.kubernetes.io/") || strings.HasPrefix(k, "helm.sh/") {
				labels[k] = v
			}
		}
		labels["app.kubernetes.io/managed-by"] = "Helm"
		u.SetLabels(labels)
		u.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": ns})
		gvr := schema.GroupVersionResource{Group: u.GroupVersionKind().Group, Version: u.GroupVersionKind().Version,
			Resource: strings.ToLower(u.GetKind()) + "s"}
		_, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{FieldManager: "helm"})
		assert.NilError(t, err)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	_, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Labels: map[string]string{"owner": "helm", "name": "web", "status": "deployed", "version": "1"}},
		Type:       "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("H4sI")},
	}, metav1.CreateOptions{FieldManager: "helm"})
	assert.NilError(t, err)
}

func renderedObjects(t *testing.T, out string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		assert.NilError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		objs = append(objs, u)
	}
	return objs
}

// The migration guide's Helm path (docs/migrating.md), as a team would
// walk it: a release Helm installed, its chart's objects brought into a
// module as they are, `opm apply --adopt`, a clean `opm diff --exit-code`,
// then the module drops the liveness probe and the next apply removes it
// (and Helm's annotations), leaving Helm's release Secret alone.
func TestMigrateFromHelm(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{
		"app/app.cue": chartModule,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

releases: web: core.#ModuleRelease & {#module: appmodule, metadata: {name: "web", namespace: "` + ns + `"}}
`,
	})
	kc := []string{"--kubeconfig", env.Kubeconfig}
	code, out, errOut := runOpm(t, "render", dir)
	assert.Equal(t, code, 0, errOut)
	helmInstall(t, ns, renderedObjects(t, out))

	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir}, kc...)...)
	assert.Equal(t, code, 1, "objects Helm wrote lack the release's labels: --adopt is needed\n%s%s", out, errOut)
	assert.Check(t, is.Contains(errOut, "--adopt"))

	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir, "--adopt"}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "deployment.apps/web configured: adopted: took ownership of"))
	assert.Check(t, is.Contains(out, "from helm"))

	code, out, errOut = runOpm(t, append([]string{"diff", dir, "--exit-code"}, kc...)...)
	assert.Equal(t, code, 0, "after adoption nothing differs\n%s%s", out, errOut)

	noProbe := deploytest.Values(t, "liveness: false")
	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir, "-f", noProbe}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "deployment.apps/web configured"))
	code, out, errOut = runOpm(t, append([]string{"diff", dir, "-f", noProbe, "--exit-code"}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)

	dep, err := kubernetes.NewForConfigOrDie(env.Config).AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Check(t, dep.Spec.Template.Spec.Containers[0].LivenessProbe == nil, "the dropped liveness probe is still running")
	assert.Check(t, dep.Spec.Template.Spec.Containers[0].ReadinessProbe != nil)
	assert.Equal(t, dep.Labels["app.kubernetes.io/managed-by"], "open-platform-model")
	for k := range dep.Annotations {
		assert.Check(t, !strings.HasPrefix(k, "meta.helm.sh/"), "Helm's annotation %s stayed", k)
	}
	_, err = kubernetes.NewForConfigOrDie(env.Config).CoreV1().Secrets(ns).Get(t.Context(), "sh.helm.release.v1.web.v1", metav1.GetOptions{})
	assert.NilError(t, err, "opm leaves Helm's release Secret alone: the guide deletes it by hand, never with helm uninstall")
}

// Two pipelines take over the same objects at once, as real processes:
// objects `kubectl apply` wrote from the render, then two applies of the
// release started together, one keeping a ConfigMap key and one dropping
// it. The release lock serialises them; the take-over patch is conditional
// on the resourceVersion it was computed from. Whichever ends last wins
// cleanly: the ConfigMap holds exactly its render, opm is its only field
// manager, kubectl's annotation is gone, and the inventory records it.
func TestConcurrentTakeOversAreSerialised(t *testing.T) {
	bin := buildOpm(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for round := range 3 {
		ns := env.Namespace(t)
		// Values files merge into the release's values and cannot remove a
		// key, so both configurations are files.
		dir := deploytest.Dir(t, ns, ``)
		keep := deploytest.Values(t, `config: {kept: "1", dropped: "2"}`)
		drop := deploytest.Values(t, `config: {kept: "1"}`)
		code, rendered, errOut := runOpm(t, "render", dir, "-f", keep)
		assert.Equal(t, code, 0, errOut)
		kubectlApply := exec.CommandContext(t.Context(), "kubectl", "--kubeconfig", env.Kubeconfig, "apply", "-f", "-")
		kubectlApply.Stdin = strings.NewReader(rendered)
		out, err := kubectlApply.CombinedOutput()
		assert.NilError(t, err, "%s", out)

		wants := []map[string]string{{"kept": "1", "dropped": "2"}, {"kept": "1"}}
		ps := make([]*proc, 2)
		var wg sync.WaitGroup
		for i, values := range []string{keep, drop} {
			ps[i] = startOpm(t, bin, "apply", "--no-wait", dir, "-f", values, "--kubeconfig", env.Kubeconfig,
				"--lock-holder", fmt.Sprintf("round-%d-%d", round, i))
			wg.Add(1)
			go func() { defer wg.Done(); ps[i].wait() }()
		}
		wg.Wait()
		for i, p := range ps {
			assert.Equal(t, p.code, 0, "round %d apply %d: %s%s", round, i, p.stdout.String(), p.stderr.String())
		}
		last := 0
		if ps[1].ended.After(ps[0].ended) {
			last = 1
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "app-config", metav1.GetOptions{})
		assert.NilError(t, err)
		assert.Check(t, is.DeepEqual(cm.Data, wants[last]), "round %d: apply %d ended last", round, last)
		for _, e := range cm.ManagedFields {
			assert.Check(t, e.Manager == "opm", "round %d: %s still manages the ConfigMap (%s)", round, e.Manager, e.Operation)
		}
		_, annotated := cm.Annotations["kubectl.kubernetes.io/last-applied-configuration"]
		assert.Check(t, !annotated, "round %d: kubectl's annotation stayed", round)
		_, recordedObjects := recorded(t, cs, ns)
		assert.Check(t, slices.Contains(recordedObjects, "ConfigMap/app-config"), "round %d: %v", round, recordedObjects)
	}
}
