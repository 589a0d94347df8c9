package objects

import (
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/manifest"
)

// The ownership note counts what an apply takes from other managers and
// what it drops, each truly: adding a field is neither, dropping ten is
// ten.
func TestOwnershipNoteCountsTakenAndDropped(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	c := newClient(t, Options{})
	apply := func(y string, dryRun bool) Result {
		t.Helper()
		cl := c
		if dryRun {
			cl = newClient(t, Options{DryRun: true})
		}
		got := cl.Apply(ctx, res(t, ns, y), nil, false)
		assert.NilError(t, got.Err)
		return got
	}
	apply("{apiVersion: v1, kind: ConfigMap, metadata: {name: s, namespace: NS}, data: {a: '1', b: '2', c: '3'}}", false)

	// A new key: the object changes, no ownership moves.
	got := apply("{apiVersion: v1, kind: ConfigMap, metadata: {name: s, namespace: NS}, data: {a: '1', b: '2', c: '3', d: '4'}}", true)
	assert.Equal(t, got.Action, manifest.Configured)
	assert.Equal(t, got.Reason, "")

	// Another manager writes e; opm then declares e with the same value
	// and stops declaring b and c.
	cm, err := c.cluster.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "s", metav1.GetOptions{})
	assert.NilError(t, err)
	cm.Data["e"] = "5"
	_, err = c.cluster.Clientset.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "someone-else"})
	assert.NilError(t, err)
	y := "{apiVersion: v1, kind: ConfigMap, metadata: {name: s, namespace: NS}, data: {a: '1', e: '5'}}"
	got = apply(y, true)
	assert.Equal(t, got.Reason, "would take ownership of 1 field(s), and would drop 2 field(s) it no longer declares")
	got = apply(y, false)
	assert.Equal(t, got.Reason, "took ownership of 1 field(s), and dropped 2 field(s) it no longer declares")
	live, err := c.cluster.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "s", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.DeepEqual(t, live.Data, map[string]string{"a": "1", "e": "5"})
}
