package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// certManagerModule is docs/migrating.md's Helm path for a real chart:
// cert-manager's `helm template --output-dir` files, embedded as text.
const certManagerModule = `@extern(embed)

package certmanager

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/certmanager@v0", name: "cert-manager", version: "1.19.1"}

#config: {}

#components: "cert-manager": {
	core.#Manifests
	spec: manifests: _chart
}

_chart: _ @embed(glob="chart/templates/*.yaml", type=text)
`

// chartOutput unpacks a recorded `helm template --output-dir` of a chart
// (testdata/helm, see its README) into dir/chart, as the guide's first
// step writes it, and drops the hook templates as the guide says.
func chartOutput(t *testing.T, archive, dir string) {
	t.Helper()
	chart := filepath.Join(dir, "chart")
	assert.NilError(t, os.RemoveAll(chart))
	f, err := os.Open(filepath.Join("testdata", "helm", archive))
	assert.NilError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	assert.NilError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		assert.NilError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		assert.NilError(t, err)
		if strings.Contains(string(data), "helm.sh/hook") {
			continue // a hook (startupapicheck): not an object of the release
		}
		p := filepath.Join(chart, filepath.FromSlash(h.Name))
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, data, 0o644))
	}
}

// chartObjects parses every document of the files in dir/chart/templates.
func chartObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "chart", "templates", "*.yaml"))
	assert.NilError(t, err)
	var objs []*unstructured.Unstructured
	for _, file := range files {
		data, err := os.ReadFile(file)
		assert.NilError(t, err)
		for _, doc := range strings.Split(string(data), "\n---\n") {
			u := &unstructured.Unstructured{}
			assert.NilError(t, yaml.Unmarshal([]byte(doc), &u.Object))
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs
}

// helmInstallChart writes objs as `helm install` does (Create requests by
// the manager "helm", Helm's release annotations), in Helm's order: CRDs
// first and Established, then what the before hook creates, then the rest.
func helmInstallChart(t *testing.T, release, ns string, objs []*unstructured.Unstructured, afterCRDs func()) {
	t.Helper()
	cl, err := kube.FromConfig(env.Config, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		m, err := cl.Mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		assert.NilError(t, err)
		ri := cl.Dynamic.Resource(m.Resource)
		u = u.DeepCopy()
		annotations := maps.Clone(u.GetAnnotations())
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns})
		u.SetAnnotations(annotations)
		if m.Scope.Name() == "namespace" {
			if u.GetNamespace() == "" {
				u.SetNamespace(ns)
			}
			_, err = ri.Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{FieldManager: "helm"})
		} else {
			_, err = ri.Create(t.Context(), u, metav1.CreateOptions{FieldManager: "helm"})
		}
		assert.NilError(t, err, "%s %s", u.GetKind(), u.GetName())
	}
	isCRD := func(u *unstructured.Unstructured) bool { return u.GetKind() == "CustomResourceDefinition" }
	for _, u := range objs {
		if isCRD(u) {
			create(u)
			waitEstablished(t, cl, u.GetName())
		}
	}
	cl.Mapper.Reset()
	afterCRDs()
	for _, u := range objs {
		if !isCRD(u) {
			create(u)
		}
	}
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(t *testing.T, cl *kube.Cluster, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd, err := cl.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	assert.NilError(t, err, "CRD %s Established", name)
}

// A real, CRD-heavy chart migrated with only docs/migrating.md: cert-manager
// v1.19.1 installed by Helm (48 objects, 6 CRDs, RBAC names with ":",
// Roles in kube-system, several objects per template file), another team's
// Issuer and Certificate beside it; rendered as `helm template` wrote it,
// taken over without restarting a pod, then its CRDs leave the render
// (installCRDs: false) — kept, with the other team's resources — and the
// chart is upgraded to v1.20.3.
func TestMigrateCertManagerChart(t *testing.T) {
	const ns = "cert-manager" // where `helm template --namespace cert-manager` put the objects
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for _, n := range []string{ns, "team-a"} {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			assert.NilError(t, err)
		}
	}
	dir := deploytest.Write(t, map[string]string{
		"certmanager/certmanager.cue": certManagerModule,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	certmanagermod "test.example/deploy/certmanager"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
environments: production: {namespace: "cert-manager", namespaces: {clusterScoped: true, allowed: ["cert-manager", "kube-system"]}}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: "cert-manager": #module: certmanagermod
`,
	})
	mod := filepath.Join(dir, "certmanager")
	chartOutput(t, "cert-manager-v1.19.1.tar.gz", mod)
	kc := []string{"--env", "production", "--kubeconfig", env.Kubeconfig}

	// The render is the chart's objects, all of them, as they are.
	code, out, errOut := runOpm(t, "render", dir, "--env", "production")
	assert.Equal(t, code, 0, errOut)
	rendered := renderedObjects(t, out)
	assert.Equal(t, len(rendered), 48)
	var names []string
	for _, u := range rendered {
		names = append(names, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName())
	}
	assert.Check(t, slices.Contains(names, "ClusterRole//cert-manager-webhook:subjectaccessreviews"), "%v", names)
	assert.Check(t, slices.Contains(names, "Role/kube-system/cert-manager:leaderelection"), "%v", names)

	// Helm installs it; another team's custom resources are created
	// before the webhook that would validate them exists.
	teamA := func() []string {
		var got []string
		for _, r := range []schema.GroupVersionResource{{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}, {Group: "cert-manager.io", Version: "v1", Resource: "certificates"}} {
			list, err := dynamicClient(t).Resource(r).Namespace("team-a").List(t.Context(), metav1.ListOptions{})
			assert.NilError(t, err)
			for _, u := range list.Items {
				got = append(got, u.GetKind()+"/"+u.GetName())
			}
		}
		return got
	}
	helmInstallChart(t, "cert-manager", ns, chartObjects(t, mod), func() {
		for _, y := range []string{
			`{apiVersion: cert-manager.io/v1, kind: Issuer, metadata: {name: selfsigned, namespace: team-a}, spec: {selfSigned: {}}}`,
			`{apiVersion: cert-manager.io/v1, kind: Certificate, metadata: {name: web, namespace: team-a}, spec: {secretName: web-tls, dnsNames: [web.team-a.example], issuerRef: {name: selfsigned}}}`,
		} {
			u := &unstructured.Unstructured{}
			assert.NilError(t, yaml.Unmarshal([]byte(y), &u.Object))
			gvr := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: strings.ToLower(u.GetKind()) + "s"}
			_, err := dynamicClient(t).Resource(gvr).Namespace("team-a").Create(t.Context(), u, metav1.CreateOptions{})
			assert.NilError(t, err)
		}
	})
	assert.DeepEqual(t, teamA(), []string{"Issuer/selfsigned", "Certificate/web"})
	templates := podTemplates(t, cs, ns)

	// Before the take-over, diff says apply will need --adopt, and for a
	// CRD it never suggests deleting it.
	code, out, errOut = runOpm(t, append([]string{"diff", dir}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "apply refuses it unless --adopt"))
	assert.Check(t, is.Contains(out, "do not delete it: deleting a CustomResourceDefinition deletes every custom resource of its kind"))
	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir}, kc...)...)
	assert.Equal(t, code, 1, "%s%s", out, errOut)
	assert.Check(t, is.Contains(errOut, "certificates.cert-manager.io already exists but is not tracked"))
	for _, line := range strings.Split(errOut, "\n") {
		if strings.Contains(line, "CustomResourceDefinition") && strings.Contains(line, "already exists") {
			assert.Check(t, !strings.Contains(line, "delete it, or"), line)
			assert.Check(t, is.Contains(line, "pass --adopt"))
		}
	}

	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", "--adopt", dir}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "from helm"))
	code, out, errOut = runOpm(t, append([]string{"diff", "--exit-code", dir}, kc...)...)
	assert.Equal(t, code, 0, "after the take-over nothing differs\n%s%s", out, errOut)
	assert.DeepEqual(t, podTemplates(t, cs, ns), templates) // no pod template changed: no pod restarted

	// installCRDs: false — the CRD templates leave the render. Diff warns
	// before anything happens; apply keeps the CRDs (the chart annotates
	// them helm.sh/resource-policy: keep) and the other team's resources.
	crdFiles, err := filepath.Glob(filepath.Join(mod, "chart", "templates", "crd-*.yaml"))
	assert.NilError(t, err)
	assert.Equal(t, len(crdFiles), 6)
	for _, f := range crdFiles {
		assert.NilError(t, os.Remove(f))
	}
	code, out, errOut = runOpm(t, append([]string{"diff", dir}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, `kept: its helm.sh/resource-policy annotation is "keep"`))
	assert.Check(t, is.Contains(out, "serves 1 custom resource(s) in the cluster"))
	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", "--dry-run", dir}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/certificates.cert-manager.io deleted"), out)
	// The second apply has the same inputs as the first: only the flag
	// differs, and a kept CRD must not let the fast path skip the prune.
	for _, step := range []struct{ flags, says string }{
		{"", "is no longer rendered: kept, with the 1 custom resource(s) it still serves cluster-wide (pass --prune-crds to delete it and them)"},
		{"--prune-crds", `is no longer rendered but its helm.sh/resource-policy annotation is "keep": kept`},
	} {
		flags, says := step.flags, step.says
		code, out, errOut = runOpm(t, append(append([]string{"apply", "--no-wait", dir}, strings.Fields(flags)...), kc...)...)
		assert.Equal(t, code, 0, "%s%s", out, errOut)
		assert.Check(t, is.Contains(errOut, "CustomResourceDefinition.apiextensions.k8s.io/certificates.cert-manager.io "+says), "%s: %s", flags, errOut)
		assert.DeepEqual(t, teamA(), []string{"Issuer/selfsigned", "Certificate/web"})
		_, err = dynamicClient(t).Resource(crdResource).Get(t.Context(), "certificates.cert-manager.io", metav1.GetOptions{})
		assert.NilError(t, err, "the CRD was deleted (%v)", flags)
	}
	_, objs := recorded(t, cs, ns)
	assert.Check(t, slices.Contains(objs, "CustomResourceDefinition/certificates.cert-manager.io"), "the kept CRD stays recorded: %v", objs)

	// The upgrade: v1.20.3's output, CRDs included, as they are.
	chartOutput(t, "cert-manager-v1.20.3.tar.gz", mod)
	code, out, errOut = runOpm(t, append([]string{"apply", "--no-wait", dir}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out, "customresourcedefinition.apiextensions.k8s.io/certificates.cert-manager.io configured"), out)
	dep, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "cert-manager", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Check(t, strings.HasSuffix(dep.Spec.Template.Spec.Containers[0].Image, ":v1.20.3"), dep.Spec.Template.Spec.Containers[0].Image)
	crd, err := dynamicClient(t).Resource(crdResource).Get(t.Context(), "certificates.cert-manager.io", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Equal(t, crd.GetLabels()["app.kubernetes.io/version"], "v1.20.3")
	assert.DeepEqual(t, teamA(), []string{"Issuer/selfsigned", "Certificate/web"})
	code, out, errOut = runOpm(t, append([]string{"diff", "--exit-code", dir}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)

	// history takes the directory as a directory.
	code, out, errOut = runOpm(t, append([]string{"history", dir}, kc...)...)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "cert-manager"))

	// delete keeps the CRDs unless asked, and says so.
	code, out, errOut = runOpm(t, append([]string{"delete", dir}, kc...)...)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Check(t, is.Contains(out+errOut, "kept"))
	_, err = dynamicClient(t).Resource(crdResource).Get(t.Context(), "issuers.cert-manager.io", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.DeepEqual(t, teamA(), []string{"Issuer/selfsigned", "Certificate/web"})
}

// podTemplates are the Deployments' pod templates: a take-over that
// changes none restarts no pod. (Their generation moves anyway: Helm's
// annotations go, and a Deployment's annotations count as its spec.)
func podTemplates(t *testing.T, cs kubernetes.Interface, ns string) map[string]corev1.PodTemplateSpec {
	t.Helper()
	list, err := cs.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Items), 3)
	out := map[string]corev1.PodTemplateSpec{}
	for _, d := range list.Items {
		out[d.Name] = d.Spec.Template
	}
	return out
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	return dynamic.NewForConfigOrDie(env.Config)
}
