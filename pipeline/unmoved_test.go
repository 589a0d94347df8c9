package pipeline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// latestChange reads the release's inventory and its newest change.
func latestChange(t *testing.T, r pipeline.AppliedRelease) (*inventory.Inventory, *inventory.Change) {
	t.Helper()
	inv, err := inventory.Read(t.Context(), clientset(t), inventory.Release{Name: r.Name, Namespace: r.Namespace, ReleaseID: r.ReleaseID, Environment: r.Environment})
	assert.NilError(t, err)
	assert.Assert(t, inv != nil)
	_, c, ok := inv.Latest()
	assert.Assert(t, ok)
	return inv, c
}

func inventoryVersion(t *testing.T, r pipeline.AppliedRelease) string {
	t.Helper()
	s, err := clientset(t).CoreV1().Secrets(r.Namespace).Get(t.Context(), r.Inventory.Name, metav1.GetOptions{})
	assert.NilError(t, err)
	return s.ResourceVersion
}

// writeServiceStatus writes the status of HealthyModule's Service as a
// controller would, which moves its resourceVersion.
func writeServiceStatus(t *testing.T, ns string) {
	t.Helper()
	svcs := clientset(t).CoreV1().Services(ns)
	svc, err := svcs.Get(t.Context(), "web", metav1.GetOptions{})
	assert.NilError(t, err)
	svc.Status.Conditions = append(svc.Status.Conditions, metav1.Condition{Type: fmt.Sprintf("Probed%d", len(svc.Status.Conditions)), Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()})
	moved, err := svcs.UpdateStatus(t.Context(), svc, metav1.UpdateOptions{FieldManager: "a-controller"})
	assert.NilError(t, err)
	assert.Assert(t, moved.ResourceVersion != svc.ResourceVersion)
}

// devRelease is HealthyModule released as app in environment dev, in a
// namespace of its own.
func devRelease(t *testing.T) (ns, dir string) {
	t.Helper()
	ns = env.Namespace(t)
	return ns, deploytest.HealthyDir(t, fmt.Sprintf(`
environments: dev: namespace: %q
releases: app: #module: appmodule
`, ns))
}

// A re-apply whose inputs are those of the recorded change, with nothing
// on the cluster moved, renders nothing and writes nothing; any moved
// input, a touched or deleted object, or --no-skip takes the full path.
func TestApplySkipsTheRenderWhenNothingMoved(t *testing.T) {
	ns, dir := devRelease(t)
	opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "dev"}, ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}}
	apply := func(o pipeline.ApplyOptions) pipeline.AppliedRelease {
		t.Helper()
		res, err := pipeline.Apply(t.Context(), o)
		assert.NilError(t, err)
		assert.Equal(t, len(res.Releases), 1)
		return res.Releases[0]
	}

	first := apply(opts)
	assert.Check(t, !first.InputsIdentical)
	_, c := latestChange(t, first)
	assert.Check(t, strings.HasPrefix(c.Inputs, fingerprint.Prefix), "the change records its inputs: %q", c.Inputs)

	written := inventoryVersion(t, first)
	again := apply(opts)
	assert.Check(t, again.InputsIdentical, report.AppliedLine(again))
	assert.Equal(t, again.Counts.Unchanged, 3)
	assert.Equal(t, again.ChangeID, first.ChangeID)
	assert.Equal(t, again.ManifestDigest, first.ManifestDigest)
	assert.Check(t, strings.Contains(report.AppliedLine(again), "unchanged (inputs identical)"), report.AppliedLine(again))
	assert.Equal(t, inventoryVersion(t, again), written, "nothing was written")

	// A controller's status write moves the Service's version, and the
	// skip still holds: its content, read whole, is as applied.
	writeServiceStatus(t, ns)
	assert.Check(t, apply(opts).InputsIdentical, "a status write is no drift")
	assert.Equal(t, inventoryVersion(t, again), written, "nothing was written")

	// --no-skip renders.
	noSkip := opts
	noSkip.NoSkip = true
	assert.Check(t, !apply(noSkip).InputsIdentical)

	// Someone edits an object (kubectl edit): the full path restores it.
	cms := clientset(t).CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(t.Context(), "web-config", metav1.GetOptions{})
	assert.NilError(t, err)
	cm.Data["stamp"] = "edited by hand"
	_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	assert.NilError(t, err)
	fixed := apply(opts)
	assert.Check(t, !fixed.InputsIdentical)
	assert.Equal(t, fixed.Counts.Configured, 1)
	assert.Check(t, apply(opts).InputsIdentical)

	// Someone deletes an object: the full path re-creates it.
	assert.NilError(t, cms.Delete(t.Context(), "web-config", metav1.DeleteOptions{}))
	recreated := apply(opts)
	assert.Check(t, !recreated.InputsIdentical)
	assert.Equal(t, recreated.Counts.Created, 1)

	// A moved input: a values file.
	f := deploytest.Values(t, `stamp: "one"`)
	withF := opts
	withF.ValuesFiles = []string{f}
	assert.Check(t, !apply(withF).InputsIdentical)
	assert.Check(t, apply(withF).InputsIdentical)
	assert.NilError(t, os.WriteFile(f, []byte(`stamp: "two"`+"\n"), 0o644))
	changed := apply(withF)
	assert.Check(t, !changed.InputsIdentical)
	assert.Equal(t, changed.Counts.Configured, 1)

	// A moved input: the module.
	p := filepath.Join(dir, "app", "app.cue")
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(p, []byte(strings.Replace(string(b), `version:    "1.0.0"`, `version:    "1.0.1"`, 1)), 0o644))
	assert.Check(t, !apply(withF).InputsIdentical)
}

// A commit that does not touch a release still reaches its inventory on
// the fast path (a promotion gate reads it), under the release's lock.
func TestSkippedApplyRecordsTheNewCommit(t *testing.T) {
	_, dir := devRelease(t)
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "one")
	opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "dev"}, ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}}
	first, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Check(t, !first.Releases[0].InputsIdentical, "the first apply renders")
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("unrelated\n"), 0o644))
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "two")
	head := gitRun(t, dir, "rev-parse", "HEAD")
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	r := res.Releases[0]
	assert.Check(t, r.InputsIdentical)
	assert.Check(t, r.Inventory.Written)
	_, c := latestChange(t, r)
	assert.Equal(t, c.Source.Commit, head)
}

// diff takes the same fast path: a release whose inputs are its recorded
// change's, untouched since, is all unchanged without a render — and
// ghosts are still found.
func TestDiffSkipsTheRenderWhenNothingMoved(t *testing.T) {
	ns, dir := devRelease(t)
	sel := pipeline.Selection{Dir: dir, Environment: "dev"}
	co := pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}
	for range 2 {
		_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: co})
		assert.NilError(t, err)
	}
	cs, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	rc := cs.Releases[0]
	assert.Check(t, rc.InputsIdentical)
	assert.Equal(t, rc.Counts.Unchanged, 3)
	assert.Equal(t, len(rc.Objects), 3)
	assert.Check(t, rc.Base != nil && rc.Base.ChangeID == rc.Head.ChangeID && rc.Head.ChangeID != "")

	full, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: co, NoSkip: true})
	assert.NilError(t, err)
	assert.Check(t, !full.Releases[0].InputsIdentical)
	assert.Equal(t, full.Releases[0].Head, rc.Head, "the fast path reports what a render reports")

	// A controller's status write moves the Service's resourceVersion: its
	// metadata no longer tells, its content read whole does — untouched.
	writeServiceStatus(t, ns)
	cs, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	assert.Check(t, cs.Releases[0].InputsIdentical, "a status write is no drift")
	assert.Equal(t, cs.Releases[0].Counts.Unchanged, 3)

	// A ghost: an object with the release's labels nobody recorded.
	cm, err := clientset(t).CoreV1().ConfigMaps(ns).Get(t.Context(), "web-config", metav1.GetOptions{})
	assert.NilError(t, err)
	ghost := cm.DeepCopy()
	ghost.ObjectMeta = metav1.ObjectMeta{Name: "left-behind", Namespace: ns, Labels: cm.Labels}
	_, err = clientset(t).CoreV1().ConfigMaps(ns).Create(t.Context(), ghost, metav1.CreateOptions{})
	assert.NilError(t, err)
	cs, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	assert.Check(t, cs.Releases[0].InputsIdentical)
	assert.Equal(t, cs.Releases[0].Counts.Ghost, 1)

	// An edit by hand: rendered and compared.
	cm.Data["stamp"] = "edited"
	_, err = clientset(t).CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{})
	assert.NilError(t, err)
	cs, err = pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	assert.Check(t, !cs.Releases[0].InputsIdentical)
	assert.Equal(t, cs.Releases[0].Counts.Modified, 1)
}

// The identities of rendered releases are cached by fingerprint, so a
// re-apply where nothing moved evaluates no CUE; an entry that does not
// match the cluster only costs the full path.
func TestIdentityCacheServesTheFastPath(t *testing.T) {
	cacheDir := t.TempDir()
	t.Setenv("OPM_CACHE_DIR", cacheDir)
	ns, dir := devRelease(t)
	opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "dev"}, ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}}
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	first := res.Releases[0]
	_, c := latestChange(t, first)
	b, ok := pipeline.CachedIdentity(cacheDir, c.Inputs)
	assert.Assert(t, ok, "the full apply cached the identity")
	assert.Assert(t, strings.Contains(b, first.ReleaseID), b)
	// Never the policy: who the release acts as and where it may write are
	// read from the directory on every hit.
	assert.Assert(t, !strings.Contains(b, "reach") && !strings.Contains(b, "cluster"), b)
	assert.Assert(t, !strings.Contains(b, "smoke-secret-value"), "no values in the cache")

	res, err = pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Check(t, res.Releases[0].InputsIdentical)

	// A forged entry (another namespace, its seal recomputed) is one the
	// environment could not have rendered: not served; the identity is
	// rendered (and cached again), and the answer is the release's.
	assert.NilError(t, pipeline.ForgeIdentity(cacheDir, c.Inputs, strings.ReplaceAll(b, ns, "elsewhere")))
	res, err = pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Equal(t, res.Releases[0].Namespace, ns)
	assert.Check(t, res.Releases[0].InputsIdentical, "the rendered identity finds the recorded change")
	again, ok := pipeline.CachedIdentity(cacheDir, c.Inputs)
	assert.Assert(t, ok && again == b, "the forged entry was not replaced: %s", again)
}

// Status reads the identities an apply cached, so it evaluates no CUE when
// nothing moved; the skip is verified like apply's (OPM_VERIFY_SKIPS, on in
// these tests, renders them and fails on a difference), and without the
// verification an entry that finds no inventory where it says is not
// trusted: status renders and answers for the real release.
func TestStatusReadsTheCachedIdentities(t *testing.T) {
	cacheDir := t.TempDir()
	t.Setenv("OPM_CACHE_DIR", cacheDir)
	ns, dir := devRelease(t)
	sel := pipeline.Selection{Dir: dir, Environment: "dev"}
	co := pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	_, c := latestChange(t, res.Releases[0])
	b, ok := pipeline.CachedIdentity(cacheDir, c.Inputs)
	assert.Assert(t, ok)
	status := func() (*pipeline.StatusResult, error) {
		return pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co})
	}
	st, err := status()
	assert.NilError(t, err)
	assert.Equal(t, st.Releases[0].Namespace, ns)
	assert.Equal(t, st.Releases[0].ReleaseID, res.Releases[0].ReleaseID)

	// Another release's identity (its ID), sealed: served, and caught by
	// the verification.
	assert.NilError(t, pipeline.ForgeIdentity(cacheDir, c.Inputs, strings.ReplaceAll(b, res.Releases[0].ReleaseID, "forged-id")))
	_, err = status()
	assert.ErrorContains(t, err, "the cached identity of release app", "the cache was read, and its entry checked")

	t.Setenv(pipeline.EnvVerifySkips, "")
	st, err = status()
	assert.NilError(t, err)
	assert.Equal(t, st.Releases[0].Namespace, ns, "an entry with no inventory behind it is rendered again")
	assert.Equal(t, st.Releases[0].ReleaseID, res.Releases[0].ReleaseID)
}

// The inventory's newest change edited by hand — one entry removed — and
// that object deleted: the skip must not trust the entries (they no
// longer agree with the change's seal), and the full path re-creates the
// object.
func TestApplySkipDistrustsAnInventoryEditedByHand(t *testing.T) {
	ns, dir := devRelease(t)
	opts := pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "dev"}, ClusterOptions: pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}}
	apply := func() pipeline.AppliedRelease {
		t.Helper()
		res, err := pipeline.Apply(t.Context(), opts)
		assert.NilError(t, err)
		assert.Equal(t, len(res.Releases), 1)
		return res.Releases[0]
	}
	first := apply()
	for i := 0; i < 3 && !apply().InputsIdentical; i++ {
		// Controllers annotate what was created; a later apply records it.
	}
	assert.Assert(t, apply().InputsIdentical, "the skip is taken before the edit")

	inv, c := latestChange(t, first)
	var kept []inventory.Entry
	removed := ""
	for _, e := range c.Inventory.Entries {
		if e.Kind == "ConfigMap" && removed == "" {
			removed = e.Name
			continue
		}
		kept = append(kept, e)
	}
	assert.Assert(t, removed != "", "the release has a ConfigMap")
	c.Inventory.Entries = kept
	assert.NilError(t, inventory.Write(t.Context(), clientset(t), inv))
	assert.NilError(t, clientset(t).CoreV1().ConfigMaps(ns).Delete(t.Context(), removed, metav1.DeleteOptions{}))

	again := apply()
	assert.Check(t, !again.InputsIdentical, "a skip trusted an inventory edited by hand: %s", report.AppliedLine(again))
	_, err := clientset(t).CoreV1().ConfigMaps(ns).Get(t.Context(), removed, metav1.GetOptions{})
	assert.NilError(t, err, "the deleted ConfigMap was not re-created")
}

// One session per command: an apply that waits for health, then a diff, a
// status and a re-apply on its fast path, all in one session, connect to
// the cluster (and discover its API) once.
func TestASessionConnectsOncePerCluster(t *testing.T) {
	_, dir := devRelease(t)
	ctx := pipeline.WithSession(t.Context())
	assert.Assert(t, pipeline.WithSession(ctx) == ctx, "a session is opened once")
	sel := pipeline.Selection{Dir: dir, Environment: "dev"}
	co := pipeline.ClusterOptions{Kubeconfig: env.Kubeconfig()}
	_, err := pipeline.Apply(ctx, pipeline.ApplyOptions{Selection: sel, ClusterOptions: co, Wait: true, WaitTimeout: time.Minute})
	assert.NilError(t, err)
	_, err = pipeline.Diff(ctx, pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	_, err = pipeline.Status(ctx, pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co})
	assert.NilError(t, err)
	_, err = pipeline.Apply(ctx, pipeline.ApplyOptions{Selection: sel, ClusterOptions: co})
	assert.NilError(t, err)
	assert.Equal(t, pipeline.Dialed(ctx), 1)
	// And every file of the deployment was read from disk once, by
	// whichever step read it first, for all of those steps.
	reads := load.FilesOf(ctx).Reads()
	deploy := filepath.Join(dir, "deploy.cue")
	if abs, err := filepath.Abs(deploy); err == nil {
		deploy = abs
	}
	assert.Equal(t, reads[deploy], 1, "%v", reads)
	for name, n := range reads {
		assert.Check(t, n == 1, "%s read %d times", name, n)
	}
}
