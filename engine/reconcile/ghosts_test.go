package reconcile

import (
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/preview"
)

// Ghosts (objects carrying the release's id, neither recorded nor
// rendered) are pruned with PruneGhosts, exactly the set diff reports,
// with the stale set's protections; a ghost kept is not recorded.
func TestPruneGhosts(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	admin := cluster(t).Clientset
	rel := direct(t, "haunted", ns, configMapDoc("NS", "kept"))
	mustApply(t, rel, Options{})
	ours := map[string]string{manifest.LabelManagedBy: manifest.ManagedByOPM, manifest.LabelReleaseName: "haunted", manifest.LabelReleaseUUID: rel.ReleaseID}
	for _, name := range []string{"ghost-a", "ghost-b"} {
		_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ours}}, metav1.CreateOptions{})
		assert.NilError(t, err)
	}
	claim := pvc("ghost-claim")
	claim.Labels = ours
	_, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}, metav1.CreateOptions{})
	assert.NilError(t, err)

	pv, err := preview.Release(ctx, cluster(t), rel, preview.Options{Ghosts: true})
	assert.NilError(t, err)
	var diffGhosts []string
	for _, o := range pv.Objects {
		if o.Action == manifest.Ghost {
			diffGhosts = append(diffGhosts, o.ID().Kind+"/"+o.ID().Name)
		}
	}
	slices.Sort(diffGhosts)
	assert.DeepEqual(t, diffGhosts, []string{"ConfigMap/ghost-a", "ConfigMap/ghost-b", "PersistentVolumeClaim/ghost-claim"})

	// Without the flag, nothing happens to them.
	res := mustApply(t, rel, Options{})
	assert.Equal(t, res.Counts.Deleted, 0)
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "ghost-a") != nil)

	res = mustApply(t, rel, Options{PruneGhosts: true})
	assert.DeepEqual(t, names(res.Ghosts), diffGhosts)
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/ghost-a=deleted", "ConfigMap/ghost-b=deleted"})
	assert.DeepEqual(t, names(res.Skipped), []string{"PersistentVolumeClaim/ghost-claim=skipped"})
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "ghost-a") == nil)
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "someone-elses") != nil)
	assert.Assert(t, live(t, "v1", "PersistentVolumeClaim", ns, "ghost-claim") != nil, "PVCs are protected")
	assert.DeepEqual(t, secret(t, rel).latest(), []string{"ConfigMap/" + ns + "/kept@app"}) // a kept ghost is not recorded

	pres, err := Prune(ctx, cluster(t), rel, Options{PruneGhosts: true, PrunePVCs: true})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(pres.Pruned), []string{"PersistentVolumeClaim/ghost-claim=deleted"})
	claimNow := live(t, "v1", "PersistentVolumeClaim", ns, "ghost-claim")
	assert.Assert(t, claimNow == nil || claimNow.GetDeletionTimestamp() != nil)
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "kept") != nil)
}
