package pipeline_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// smokeDir is a deployment of deploytest.HealthyModule with environment
// "dev" whose release sets its own namespace (which Smoke must override).
func smokeDir(t *testing.T, values string) string {
	return deploytest.HealthyDir(t, fmt.Sprintf(`
environments: dev: namespace: "dev"
releases: app: {
	#module: appmodule
	metadata: namespace: "app-home"
	values: {%s}
}
`, values))
}

func smokeOptions(t *testing.T, dir string, files ...string) pipeline.SmokeOptions {
	return pipeline.SmokeOptions{
		Selection:      pipeline.Selection{Dir: dir, Environment: "dev", ValuesFiles: files},
		ClusterOptions: cluster(t),
		Timeout:        30 * time.Second, Interval: 200 * time.Millisecond,
		NamespacePrefix: "smoke-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:min(20, len(t.Name()))],
	}
}

// forgetNamespace removes a smoke namespace after the test (kept ones, and
// on long-lived clusters any that still terminate).
func forgetNamespace(t *testing.T, ns string) {
	t.Cleanup(func() {
		_ = clientset(t).CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{})
	})
}

// namespaceGoing reports whether ns is deleted or being deleted (envtest
// has no namespace controller, so it never finishes).
func namespaceGoing(t *testing.T, ns string) bool {
	got, err := clientset(t).CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	assert.NilError(t, err)
	return got.DeletionTimestamp != nil
}

func stepStates(r pipeline.SmokeRelease) map[string]string {
	out := map[string]string{}
	for _, s := range r.Steps {
		out[s.Name] = s.State
	}
	return out
}

// noSecret checks every rendering of the result for the Secret value.
func noSecret(t *testing.T, res *pipeline.SmokeResult, values ...string) {
	t.Helper()
	js, err := json.Marshal(res)
	assert.NilError(t, err)
	for name, out := range map[string]string{"json": string(js), "text": report.SmokeText(res), "markdown": report.SmokeMarkdown(res, report.MarkdownOptions{})} {
		for _, v := range values {
			assert.Check(t, !strings.Contains(out, v), "%s output shows a Secret value", name)
			assert.Check(t, !strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(v))), "%s output shows a Secret value in base64", name)
		}
	}
}

func TestSmokePasses(t *testing.T) {
	dir := smokeDir(t, "")
	// Two runs at once never share a namespace.
	var wg sync.WaitGroup
	results := make([]*pipeline.SmokeResult, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = pipeline.Smoke(t.Context(), smokeOptions(t, dir))
		}()
	}
	wg.Wait()
	var namespaces []string
	for i, res := range results {
		assert.NilError(t, errs[i])
		assert.Equal(t, len(res.Releases), 1)
		rel := res.Releases[0]
		forgetNamespace(t, rel.Namespace)
		assert.Check(t, res.Passed, report.SmokeText(res))
		assert.Check(t, rel.Passed)
		assert.DeepEqual(t, stepStates(rel), map[string]string{"apply": "passed", "healthy": "passed", "idempotent": "passed", "delete": "passed", "clean": "passed"})
		assert.Equal(t, rel.OriginalNamespace, "app-home")
		assert.Check(t, strings.HasPrefix(rel.Namespace, "smoke-testsmokepasses-app-"), rel.Namespace)
		assert.Equal(t, rel.Objects, 3)
		for _, s := range rel.Steps {
			assert.Check(t, s.DurationSeconds > 0, s.Name)
		}
		assert.Check(t, namespaceGoing(t, rel.Namespace), "the throwaway namespace is deleted")
		assert.Check(t, is.Contains(rel.Cleanup, "namespace "+rel.Namespace+" deleted"))
		assert.Check(t, is.Contains(report.SmokeText(res), "PASSED"))
		assert.Check(t, is.Contains(report.SmokeMarkdown(res, report.MarkdownOptions{}), "✅ **Passed.**"))
		noSecret(t, res, "smoke-secret-value")
		namespaces = append(namespaces, rel.Namespace)
	}
	assert.Check(t, namespaces[0] != namespaces[1])
}

func TestSmokeKeepLeavesNamespace(t *testing.T) {
	opts := smokeOptions(t, smokeDir(t, ""))
	opts.Keep = true
	res, err := pipeline.Smoke(t.Context(), opts)
	assert.NilError(t, err)
	rel := res.Releases[0]
	forgetNamespace(t, rel.Namespace)
	assert.Check(t, res.Passed, report.SmokeText(res))
	ns, err := clientset(t).CoreV1().Namespaces().Get(t.Context(), rel.Namespace, metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Check(t, ns.DeletionTimestamp == nil, "--keep leaves the namespace")
	assert.Equal(t, ns.Labels[pipeline.SmokeNamespaceLabel], "true")
	// The delete check still ran: the release itself is gone.
	_, err = clientset(t).CoreV1().Services(rel.Namespace).Get(t.Context(), "web", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "%v", err)
	assert.Check(t, is.Contains(rel.Cleanup, "kept"))
}

func TestSmokeUnhealthyTimesOutAndCleansUp(t *testing.T) {
	opts := smokeOptions(t, smokeDir(t, "broken: true"))
	opts.Timeout = 3 * time.Second
	opts.OnStep = func(p pipeline.SmokeProgress) {
		if p.Step.Name != pipeline.SmokeHealthy || p.Step.State != pipeline.StepRunning {
			return
		}
		// What a kubelet would report about an image pull, quoting a
		// Secret value; it must come out masked.
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "web.", Namespace: p.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: p.Namespace, Name: "web"},
			Type:           "Warning", Reason: "SmokeTestProbe",
			Message: "pull failed with password smoke-secret-value", Count: 1,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
			Source: corev1.EventSource{Component: "smoke-test"},
		}
		_, err := clientset(t).CoreV1().Events(p.Namespace).Create(t.Context(), ev, metav1.CreateOptions{})
		assert.Check(t, err)
		if !env.Controllers() {
			// No Deployment controller here: write the conditions it would.
			d, err := dyn().Resource(deployments).Namespace(p.Namespace).Get(t.Context(), "web", metav1.GetOptions{})
			assert.NilError(t, err)
			assert.NilError(t, unstructured.SetNestedMap(d.Object, map[string]any{
				"observedGeneration": d.GetGeneration(), "replicas": int64(1), "unavailableReplicas": int64(1),
				"conditions": []any{map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."}},
			}, "status"))
			_, err = dyn().Resource(deployments).Namespace(p.Namespace).UpdateStatus(t.Context(), d, metav1.UpdateOptions{})
			assert.Check(t, err)
		}
	}
	res, err := pipeline.Smoke(t.Context(), opts)
	assert.NilError(t, err, "a failed check is a result, not an error")
	rel := res.Releases[0]
	forgetNamespace(t, rel.Namespace)
	assert.Check(t, !res.Passed)
	assert.Equal(t, rel.FailedStep, "healthy", report.SmokeText(res))
	assert.DeepEqual(t, stepStates(rel), map[string]string{"apply": "passed", "healthy": "failed", "idempotent": "skipped", "delete": "skipped", "clean": "skipped"})
	assert.Check(t, is.Contains(rel.Steps[1].Detail, "timed out after 3s"))

	var dep *pipeline.SmokeObject
	for i, o := range rel.Unhealthy {
		if o.Kind == "Deployment" && o.Name == "web" {
			dep = &rel.Unhealthy[i]
		}
	}
	assert.Assert(t, dep != nil, "the Deployment is reported unhealthy: %+v", rel.Unhealthy)
	assert.Equal(t, string(dep.Health), "InProgress")
	assert.Assert(t, len(dep.Conditions) > 0, "with its conditions")
	found := false
	for _, e := range rel.Events {
		if e.Reason == "SmokeTestProbe" {
			found = true
			assert.Equal(t, e.Message, "pull failed with password (masked)")
			assert.Equal(t, e.Object, "deployment/web")
		}
	}
	assert.Check(t, found, "recent events are reported: %+v", rel.Events)
	noSecret(t, res, "smoke-secret-value")
	md := report.SmokeMarkdown(res, report.MarkdownOptions{})
	assert.Check(t, is.Contains(md, "❌ **Failed.**"))
	assert.Check(t, is.Contains(md, "**Not healthy:**"))
	assert.Check(t, is.Contains(md, "SmokeTestProbe"))

	// Cleaned up: nothing of the release left, the namespace going.
	_, err = dyn().Resource(deployments).Namespace(rel.Namespace).Get(t.Context(), "web", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "the Deployment is deleted: %v", err)
	sec, err := clientset(t).CoreV1().Secrets(rel.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "module-release.opmodel.dev/uuid=" + rel.ReleaseID})
	assert.NilError(t, err)
	assert.Equal(t, len(sec.Items), 0, "no Secret of the release, inventory included")
	assert.Check(t, namespaceGoing(t, rel.Namespace))
	assert.Check(t, is.Contains(rel.Cleanup, "release deleted"))
}

// A render that changes between two runs (here a timestamp-like value in
// a values file, rewritten between apply and the idempotence check, as a
// transformer stamping the time would) is caught by the diff step.
func TestSmokeCatchesNonIdempotentRelease(t *testing.T) {
	stamp := deploytest.Values(t, `stamp: "2026-01-01T00:00:00Z"`)
	opts := smokeOptions(t, smokeDir(t, ""), stamp)
	opts.Releases = []string{"app"}
	opts.OnStep = func(p pipeline.SmokeProgress) {
		if p.Step.Name == pipeline.SmokeIdempotent && p.Step.State == pipeline.StepRunning {
			assert.Check(t, os.WriteFile(stamp, []byte(`stamp: "`+time.Now().UTC().Format(time.RFC3339Nano)+`"`+"\n"), 0o644))
		}
	}
	res, err := pipeline.Smoke(t.Context(), opts)
	assert.NilError(t, err)
	rel := res.Releases[0]
	forgetNamespace(t, rel.Namespace)
	assert.Check(t, !res.Passed)
	assert.Equal(t, rel.FailedStep, "idempotent", report.SmokeText(res))
	assert.DeepEqual(t, stepStates(rel), map[string]string{"apply": "passed", "healthy": "passed", "idempotent": "failed", "delete": "skipped", "clean": "skipped"})
	assert.Equal(t, len(rel.Changes), 1, "%+v", rel.Changes)
	assert.Equal(t, rel.Changes[0].Ref.Kind, "ConfigMap")
	assert.Equal(t, string(rel.Changes[0].Action), "modified")
	assert.Check(t, is.Contains(rel.Changes[0].Diff, "2026-01-01T00:00:00Z"))
	assert.Check(t, is.Contains(report.SmokeMarkdown(res, report.MarkdownOptions{}), "**A second apply would change:**"))
	_, err = clientset(t).CoreV1().ConfigMaps(rel.Namespace).Get(t.Context(), "web-config", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "cleaned up: %v", err)
	assert.Check(t, namespaceGoing(t, rel.Namespace))
	noSecret(t, res, "smoke-secret-value")
}

// A smoke test stays within tenancy: where the environment allows only
// some namespaces, the throwaway one is named to match an allowed glob;
// where none could match, it is refused before anything runs, saying which
// pattern to add.
func TestSmokeNamespaceWithinTheEnvironmentsReach(t *testing.T) {
	dir := func(allowed string) string {
		return deploytest.HealthyDir(t, fmt.Sprintf(`
environments: dev: {namespace: "app-home", namespaces: allowed: [%s]}
releases: app: #module: appmodule
`, allowed))
	}
	opts := smokeOptions(t, dir(`"app-home", "app-home-*"`))
	opts.NamespacePrefix = ""
	res, err := pipeline.Smoke(t.Context(), opts)
	assert.NilError(t, err)
	rel := res.Releases[0]
	forgetNamespace(t, rel.Namespace)
	assert.Check(t, res.Passed, report.SmokeText(res))
	assert.Check(t, strings.HasPrefix(rel.Namespace, "app-home-smoke-app-"), rel.Namespace)

	opts = smokeOptions(t, dir(`"app-home"`))
	opts.NamespacePrefix = ""
	before, err := clientset(t).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: pipeline.SmokeNamespaceLabel})
	assert.NilError(t, err)
	_, err = pipeline.Smoke(t.Context(), opts)
	assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
	assert.Check(t, is.Contains(err.Error(), `environment "dev" lets release app write only into app-home`))
	assert.Check(t, is.Contains(err.Error(), `"app-home-smoke-*"`))
	after, err := clientset(t).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: pipeline.SmokeNamespaceLabel})
	assert.NilError(t, err)
	// Compared by name: the first smoke test's namespace may finish
	// terminating meanwhile; none may appear.
	had := map[string]bool{}
	for _, ns := range before.Items {
		had[ns.Name] = true
	}
	for _, ns := range after.Items {
		assert.Check(t, had[ns.Name], "a throwaway namespace %s was created", ns.Name)
	}
}
