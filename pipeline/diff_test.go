package pipeline_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func cluster(t *testing.T) pipeline.ClusterOptions {
	return pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}
}

// applyDir applies the release in dir (with values files) the way opm
// apply does, as setup for diff, status and delete tests.
func applyDir(t *testing.T, dir string, files ...string) *reconcile.Result {
	t.Helper()
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, ValuesFiles: files})
	assert.NilError(t, err)
	cl, err := kube.FromConfig(env.Config(), "opm-test", kube.Options{})
	assert.NilError(t, err)
	res, err := reconcile.Apply(t.Context(), cl, rels[0], reconcile.Options{})
	assert.NilError(t, err)
	return res
}

func diffRelease(t *testing.T, dir string, files ...string) pipeline.ReleaseChanges {
	t.Helper()
	cs, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: pipeline.Selection{Dir: dir, ValuesFiles: files}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Equal(t, len(cs.Releases), 1)
	return cs.Releases[0]
}

// classes maps "Kind/name" to its change class.
func classes(rc pipeline.ReleaseChanges) map[string]pipeline.Change {
	out := map[string]pipeline.Change{}
	for _, o := range rc.Objects {
		out[o.Ref.Kind+"/"+o.Ref.Name] = o.Action
	}
	return out
}

func TestDiffClassifiesEveryKindOfChange(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")

	first := diffRelease(t, dir)
	assert.DeepEqual(t, classes(first), map[string]pipeline.Change{
		"Deployment/app": pipeline.Added, "Service/app": pipeline.Added, "Secret/app-creds": pipeline.Added,
	})
	assert.Check(t, first.Base == nil, "no inventory yet")
	assert.DeepEqual(t, first.Reach, &pipeline.Footprint{Namespaces: []string{ns}}) // where it writes

	applied := applyDir(t, dir)
	same := diffRelease(t, dir)
	assert.DeepEqual(t, classes(same), map[string]pipeline.Change{
		"Deployment/app": pipeline.Unchanged, "Service/app": pipeline.Unchanged, "Secret/app-creds": pipeline.Unchanged,
	})
	assert.Assert(t, same.Base != nil)
	assert.Equal(t, same.Base.ChangeID, applied.ChangeID)
	assert.Equal(t, same.Base.ChangeID, same.Head.ChangeID)
	assert.Check(t, !same.Counts.Changed())

	t.Run("value change", func(t *testing.T) {
		rc := diffRelease(t, dir, deploytest.Values(t, "replicas: 3"))
		assert.Equal(t, classes(rc)["Deployment/app"], pipeline.Modified)
		assert.Equal(t, classes(rc)["Service/app"], pipeline.Unchanged)
		d := objectDiff(rc, "Deployment", "app")
		assert.Check(t, is.Contains(d, "-  replicas: 1"))
		assert.Check(t, is.Contains(d, "+  replicas: 3"))
		assert.Check(t, rc.Head.ChangeID != rc.Base.ChangeID)
	})
	t.Run("rename makes the old objects stale", func(t *testing.T) {
		rc := diffRelease(t, dir, deploytest.Values(t, `name: "app2"`))
		assert.DeepEqual(t, classes(rc), map[string]pipeline.Change{
			"Deployment/app2": pipeline.Added, "Service/app2": pipeline.Added, "Secret/app2-creds": pipeline.Added,
			"Deployment/app": pipeline.Stale, "Service/app": pipeline.Stale, "Secret/app-creds": pipeline.Stale,
		})
		assert.Check(t, is.Contains(objectDiff(rc, "Deployment", "app"), "-kind: Deployment"), "a stale object shows as removed")
	})
	t.Run("component rename is not stale", func(t *testing.T) {
		rc := diffRelease(t, dir, deploytest.Values(t, `component: "server"`))
		assert.Equal(t, rc.Counts.Stale, 0)
		assert.Equal(t, rc.Counts.Added, 0)
		assert.Equal(t, classes(rc)["Deployment/app"], pipeline.Modified, "the component label changes")
	})
	t.Run("kind change", func(t *testing.T) {
		rc := diffRelease(t, dir, deploytest.Values(t, `type: "stateful"`))
		assert.Equal(t, classes(rc)["StatefulSet/app"], pipeline.Added)
		assert.Equal(t, classes(rc)["Deployment/app"], pipeline.Stale)
	})
}

func objectDiff(rc pipeline.ReleaseChanges, kind, name string) string {
	for _, o := range rc.Objects {
		if o.Ref.Kind == kind && o.Ref.Name == name {
			return o.Diff
		}
	}
	return ""
}

func TestDiffIntoAMissingNamespaceIsAdded(t *testing.T) {
	dir := deploytest.Dir(t, "never-created-ns", "")
	rc := diffRelease(t, dir)
	assert.Equal(t, rc.Counts.Added, 3)
	assert.Equal(t, rc.Error, "")
	assert.Check(t, is.Contains(objectDiff(rc, "Service", "app"), "+kind: Service"))
}

// Scenario F: an object a failed apply created carries the release's
// labels but is in neither the inventory nor the render.
func TestDiffReportsGhosts(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")
	applyDir(t, dir)

	rels, err := render.Render(t.Context(), render.Options{Dir: dir, ValuesFiles: []string{deploytest.Values(t, `name: "ghost"`)}})
	assert.NilError(t, err)
	for _, r := range rels[0].Resources {
		if r.Object.GetKind() != "Service" {
			continue
		}
		u := r.Object.DeepCopy()
		_, err := dynamic.NewForConfigOrDie(env.Config()).Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
		assert.NilError(t, err)
	}
	rc := diffRelease(t, dir)
	assert.Equal(t, classes(rc)["Service/ghost"], pipeline.Ghost)
	assert.Equal(t, rc.Counts.Ghost, 1)
	assert.Check(t, !rc.Counts.Changed(), "a ghost is reported, not something apply changes")
	assert.Check(t, len(rc.Warnings) > 0)
}

func TestDiffNeverShowsSecretValues(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `secret: "first-password-value"`)
	applyDir(t, dir)
	cs, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{
		Selection:      pipeline.Selection{Dir: dir, ValuesFiles: []string{deploytest.Values(t, `secret: "second-password-value"`)}},
		ClusterOptions: cluster(t),
	})
	assert.NilError(t, err)
	rc := cs.Releases[0]
	assert.Equal(t, classes(rc)["Secret/app-creds"], pipeline.Modified)
	js, err := json.Marshal(cs)
	assert.NilError(t, err)
	for format, out := range map[string]string{
		"text": report.Text(cs, false), "json": string(js), "markdown": report.Markdown(cs, report.MarkdownOptions{}),
	} {
		for _, secret := range []string{"first-password-value", "second-password-value"} {
			assert.Check(t, !strings.Contains(out, secret), "%s output shows a Secret value", format)
			assert.Check(t, !strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(secret))), "%s output shows a Secret value (base64)", format)
		}
		assert.Check(t, is.Contains(out, "masked"), "%s output marks the change", format)
	}
}

func TestDiffMarkdownSaysLiveAndRender(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")
	applyDir(t, dir)
	cs, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: pipeline.Selection{Dir: dir, ValuesFiles: []string{deploytest.Values(t, "replicas: 2")}}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	md := report.Markdown(cs, report.MarkdownOptions{})
	assert.Check(t, is.Contains(md, "opm diff"))
	assert.Check(t, !strings.Contains(md, "opm review"))
	assert.Check(t, is.Contains(md, "live"))
}
