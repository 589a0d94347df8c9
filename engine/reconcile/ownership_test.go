package reconcile

import (
	"encoding/json"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
)

// tamper adds entries to the latest change of rel's inventory Secret, as
// someone with write access to that one Secret could.
func tamper(t *testing.T, ns, name string, add ...inventory.Entry) {
	t.Helper()
	secrets := cluster(t).Clientset.CoreV1().Secrets(ns)
	s, err := secrets.Get(t.Context(), name, metav1.GetOptions{})
	assert.NilError(t, err)
	var index []string
	assert.NilError(t, json.Unmarshal(s.Data["index"], &index))
	var c map[string]any
	assert.NilError(t, json.Unmarshal(s.Data[index[0]], &c))
	inv := c["inventory"].(map[string]any)
	entries := inv["entries"].([]any)
	for _, e := range add {
		entries = append(entries, e)
	}
	inv["entries"] = entries
	s.Data[index[0]], err = json.Marshal(c)
	assert.NilError(t, err)
	_, err = secrets.Update(t.Context(), s, metav1.UpdateOptions{})
	assert.NilError(t, err)
}

// Entries added to the inventory by hand — an object in another namespace,
// another release's object, an unlabelled one — are never deleted by
// prune, apply's prune or delete: kept, warned about, still recorded.
func TestTamperedInventoryDeletesNothingForeign(t *testing.T) {
	ctx := t.Context()
	ns, other := env.Namespace(t), env.Namespace(t)
	admin := cluster(t).Clientset
	rel := direct(t, "own", ns, configMapDoc("NS", "mine"))
	mustApply(t, rel, Options{})

	mk := func(ns, name string, labels map[string]string) inventory.Entry {
		_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		assert.NilError(t, err)
		return inventory.Entry{ID: manifest.ID{Kind: "ConfigMap", Namespace: ns, Name: name}, V: "v1", Component: "app"}
	}
	foreign := []inventory.Entry{
		mk(other, "elsewhere", nil),
		mk(ns, "other-release", map[string]string{manifest.LabelManagedBy: manifest.ManagedByOPM, manifest.LabelReleaseName: "own",
			manifest.LabelReleaseUUID: "00000000-0000-5000-8000-000000000000"}),
		mk(ns, "unlabelled", nil),
	}
	tamper(t, ns, "opm.own."+rel.ReleaseID, foreign...)

	check := func(res *Result, op string) {
		t.Helper()
		assert.Equal(t, res.Counts.NotOurs, 3, op)
		assert.Equal(t, res.Counts.Deleted, 0, op)
		for _, o := range res.Skipped {
			assert.Check(t, is.Contains(o.Reason, "recorded but not ours: kept"), op)
		}
		for _, e := range foreign {
			assert.Assert(t, live(t, "v1", "ConfigMap", e.Namespace, e.Name) != nil, "%s deleted %s", op, e.ID)
		}
		assert.Equal(t, len(secret(t, rel).latest()), 4, "%s keeps the foreign entries recorded", op)
	}
	res, err := Prune(ctx, cluster(t), rel, Options{})
	assert.NilError(t, err)
	check(res, "prune")
	assert.Equal(t, len(res.Warnings), 3)

	res, err = Apply(ctx, cluster(t), rel, Options{})
	assert.NilError(t, err)
	check(res, "apply")

	inv := mustRead(t, rel.Namespace, rel.Name, rel.ReleaseID)
	dres, err := Delete(ctx, cluster(t), rel, inv, inv.LatestEntries(), DeleteOptions{})
	assert.NilError(t, err)
	assert.Equal(t, dres.Counts.NotOurs, 3)
	assert.Assert(t, live(t, "v1", "ConfigMap", ns, "mine") == nil, "the release's own object is deleted")
	for _, e := range foreign {
		assert.Assert(t, live(t, "v1", "ConfigMap", e.Namespace, e.Name) != nil, "delete deleted %s", e.ID)
	}
}

func mustRead(t *testing.T, ns, name, id string) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.Read(t.Context(), cluster(t).Clientset, inventory.Release{Name: name, Namespace: ns, ReleaseID: id})
	assert.NilError(t, err)
	return inv
}
