package pipeline_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

var (
	applySvcs    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	applyDeploys = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func present(t *testing.T, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := dynamic.NewForConfigOrDie(env.Config()).Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	assert.NilError(t, err)
	return true
}

func applyOpts(dir string, files ...string) pipeline.ApplyOptions {
	return pipeline.ApplyOptions{
		Selection:      pipeline.Selection{Dir: dir, ValuesFiles: files},
		ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()},
	}
}

// The JSON result is the render result per release plus what happened.
func TestApplyResultJSON(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `name: "web"`)
	var lines []string
	opts := applyOpts(dir)
	opts.Progress = func(e pipeline.ProgressEvent) { lines = append(lines, e.Line()) }
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.DeepEqual(t, lines, []string{"secret/web-creds created", "service/web created", "deployment.apps/web created"})

	b, err := json.Marshal(res)
	assert.NilError(t, err)
	var doc struct {
		Releases []map[string]json.RawMessage `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, len(doc.Releases), 1)
	rel := doc.Releases[0]
	for _, k := range []string{"name", "namespace", "releaseId", "module", "values", "manifestDigest", "changeId", "resources",
		"applied", "stale", "pruned", "skipped", "inventory", "cluster", "counts", "dryRun"} {
		_, ok := rel[k]
		assert.Check(t, ok, "missing %q", k)
	}
	var applied []map[string]string
	assert.NilError(t, json.Unmarshal(rel["applied"], &applied))
	assert.DeepEqual(t, applied[0], map[string]string{"kind": "Secret", "namespace": ns, "name": "web-creds", "action": "created", "version": "v1", "component": "web"})
	assert.Equal(t, string(rel["stale"]), "[]")
	var inv struct {
		Name      string   `json:"name"`
		ChangeIDs []string `json:"changeIds"`
	}
	assert.NilError(t, json.Unmarshal(rel["inventory"], &inv))
	r := res.Releases[0]
	assert.Equal(t, inv.Name, "opm.app."+r.ReleaseID)
	assert.DeepEqual(t, inv.ChangeIDs, []string{r.ChangeID})

	// The summary names the cluster by server URL and context.
	sum := report.AppliedLine(r)
	server := strings.TrimSuffix(env.Config().Host, "/")
	assert.Assert(t, is.Contains(sum, "release app applied on context "+kubetest.ContextName+" ("+server+")"), sum)
	assert.Assert(t, is.Contains(sum, "3 created, 0 configured, 0 unchanged, 0 pruned, 0 skipped"), sum)
	assert.Assert(t, is.Contains(sum, "digest="+r.ManifestDigest+" change="+r.ChangeID+" inventory=opm.app."+r.ReleaseID), sum)
}

func TestApplyThenPrune(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, `name: "web"`)
	_, err := pipeline.Apply(t.Context(), applyOpts(dir))
	assert.NilError(t, err)

	renamed := deploytest.Values(t, `name: "site"`)
	opts := applyOpts(dir, renamed)
	opts.NoPrune = true
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	r := res.Releases[0]
	assert.Equal(t, r.Operation, "apply")
	assert.Equal(t, r.Counts.Stale, 3)
	assert.Equal(t, len(r.Skipped), 3)
	assert.Assert(t, present(t, applySvcs, ns, "web"))

	var events []string
	pres, err := pipeline.Prune(t.Context(), pipeline.PruneOptions{
		Selection:      pipeline.Selection{Dir: dir, ValuesFiles: []string{renamed}},
		ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()},
		Progress:       func(e pipeline.ProgressEvent) { events = append(events, e.Line()) },
	})
	assert.NilError(t, err)
	p := pres.Releases[0]
	assert.Equal(t, p.Operation, "prune")
	assert.DeepEqual(t, events, []string{"deployment.apps/web deleted", "service/web deleted", "secret/web-creds deleted"})
	assert.Equal(t, p.Counts.Deleted, 3)
	assert.Assert(t, !present(t, applySvcs, ns, "web"))
	assert.Assert(t, !present(t, applyDeploys, ns, "web"))
	assert.Assert(t, present(t, applyDeploys, ns, "site"))
	assert.Assert(t, p.Inventory.Written)
	assert.Assert(t, is.Contains(report.AppliedLine(p), "release app pruned on context opm-test"))
	assert.Assert(t, is.Contains(report.AppliedLine(p), "3 stale, 3 pruned, 0 skipped"))
}

func TestApplyDryRunSummary(t *testing.T) {
	ns := env.Namespace(t)
	opts := applyOpts(deploytest.Dir(t, ns, ``))
	opts.DryRun = true
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Assert(t, res.Releases[0].DryRun)
	assert.Assert(t, is.Contains(report.AppliedLine(res.Releases[0]), "apply (server dry run, nothing written)"))
	assert.Assert(t, !present(t, applySvcs, ns, "app"))
}

// A context that is not in the kubeconfig is a connectivity error naming
// what exists; nothing is applied anywhere.
func TestApplyUnknownContext(t *testing.T) {
	ns := env.Namespace(t)
	opts := applyOpts(deploytest.Dir(t, ns, ``))
	opts.Context = "production"
	res, err := pipeline.Apply(t.Context(), opts)
	assert.ErrorContains(t, err, `context "production" (--context) is not in`)
	assert.ErrorContains(t, err, kubetest.ContextName)
	assert.Equal(t, fault.KindOf(err), fault.Connectivity)
	assert.Equal(t, len(res.Releases), 1)
	assert.Assert(t, res.Releases[0].Error != "")
	assert.Equal(t, report.AppliedLine(res.Releases[0]), "release app: apply not attempted, its cluster could not be selected")
	assert.Assert(t, !present(t, applySvcs, ns, "app"))
}

// An environment naming a kubeContext the kubeconfig lacks fails; it never
// falls back to the current context.
func TestApplyEnvironmentContextMissing(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, ``)
	extra := `package deploy

environments: prod: cluster: kubeContext: "prod-cluster"
`
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "envs.cue"), []byte(extra), 0o644))
	opts := applyOpts(dir)
	opts.Environment = "prod"
	_, err := pipeline.Apply(t.Context(), opts)
	assert.ErrorContains(t, err, `environment "prod" names kubeContext "prod-cluster"`)
	assert.ErrorContains(t, err, "contexts there: "+kubetest.ContextName)
	assert.Equal(t, fault.KindOf(err), fault.Connectivity)
	assert.Assert(t, !present(t, applySvcs, ns, "app"))
}

func TestApplyStopsAtTheFailingRelease(t *testing.T) {
	ns := env.Namespace(t)
	// An empty image passes the module's schema; the API server rejects it.
	dir := deploytest.Dir(t, ns, `image: ""`)
	res, err := pipeline.Apply(t.Context(), applyOpts(dir))
	assert.ErrorContains(t, err, "Deployment.apps/"+ns+"/app")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
	r := res.Releases[0]
	assert.Assert(t, r.Error != "")
	assert.Assert(t, !r.Inventory.Written)
	assert.Assert(t, is.Contains(report.AppliedLine(r), "release app apply failed on context opm-test"))
	assert.Assert(t, is.Contains(report.AppliedLine(r), "1 failed"))
	assert.Assert(t, is.Contains(report.AppliedLine(r), "(not written)"))
}

// While an apply waits for health, it says how far each release is, each
// time an object's health changes, and how long it has waited: "app: N of
// M objects healthy after 3s; …".
func TestApplyWaitSaysHowFarEachReleaseIs(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: dev: namespace: %q
releases: app: {#module: appmodule, values: broken: true}
`, ns))
	opts := applyOpts(dir)
	opts.Environment, opts.Wait, opts.WaitTimeout = "dev", true, 3*time.Second
	var mu sync.Mutex
	var said []string
	opts.HealthWaiting = func(s string) { mu.Lock(); defer mu.Unlock(); said = append(said, s) }
	_, err := pipeline.Apply(t.Context(), opts)
	assert.ErrorContains(t, err, "not healthy")
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, s := range said {
		if strings.HasPrefix(s, "app: ") && regexp.MustCompile(` of 4 objects healthy after [0-9]+s; deployment.apps/web: `).MatchString(s) {
			found = true
		}
	}
	assert.Check(t, found, "no progress line in %q", said)
}

// An apply that waits for health waits for the releases as it rendered
// them: the deployment is not loaded and rendered again for the wait. A
// file that breaks every later render, written as soon as the release is
// applied, does not stop the wait of an apply or of a rollout's wave; the
// same status asked afresh renders, and fails on it.
func TestTheHealthWaitTakesTheReleasesTheApplyRendered(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: a: {namespace: %[1]q, group: "g", cluster: kubeConfig: %[2]q}
releases: app: #module: appmodule
`, ns, env.Kubeconfig()))
	broken := filepath.Join(dir, "broken.cue")
	breakIt := func(pipeline.AppliedRelease) {
		assert.Check(t, os.WriteFile(broken, []byte("package deploy\n\nreleases: app: metadata: name: 1\n"), 0o644))
	}
	opts := applyOpts(dir)
	opts.Environment, opts.Wait, opts.WaitTimeout, opts.ReleaseDone = "a", true, time.Minute, breakIt
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Equal(t, len(res.Releases), 1)

	_, err = pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "a"}}})
	assert.Equal(t, fault.KindOf(err), fault.Validation, "a fresh status renders the broken directory: %v", err)

	assert.NilError(t, os.Remove(broken))
	// NoSkip: nothing moved since the apply above, and a release the fast
	// path skips is not rendered at all.
	ro := pipeline.RolloutOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Group: "g"}, ReleaseDone: breakIt, NoSkip: true}, Timeout: time.Minute}
	out, err := pipeline.Rollout(t.Context(), ro)
	assert.NilError(t, err)
	assert.Equal(t, out.Environments[0].Result, pipeline.RolloutApplied, "%+v", out.Environments[0])
}
