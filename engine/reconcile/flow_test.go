package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/objects"
)

func TestDryRunFirstApplyWritesNothing(t *testing.T) {
	ns := env.Namespace(t)
	rel := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`).render()
	var lines []string
	res := mustApply(t, rel, Options{DryRun: true, Progress: func(e Event) { lines = append(lines, e.Line()) }})
	assert.Assert(t, res.DryRun)
	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/config=created", "Service/minecraft=created", "StatefulSet/minecraft=created"})
	assert.DeepEqual(t, lines[0], "persistentvolumeclaim/config created (server dry run)")
	for _, r := range rel.Resources {
		assert.Assert(t, live(t, r.Object.GetAPIVersion(), r.Object.GetKind(), ns, r.Object.GetName()) == nil, "%s created in a dry run", r.ID())
	}
	assert.Assert(t, secret(t, rel) == nil, "no inventory in a dry run")
	assert.DeepEqual(t, res.Inventory, InventoryRef{Name: "opm.minecraft." + rel.ReleaseID, Namespace: ns, ChangeIDs: []string{rel.ChangeID}})
}

// Dry run shows the stale set, what would be pruned and what would be
// skipped, and changes nothing.
func TestDryRunReportsStaleAndSkipped(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	before := secret(t, v1)
	svc := live(t, "v1", "Service", ns, "minecraft")

	v2 := d.values(`{name: "minecraft-server", claim: "world"}`).render()
	res := mustApply(t, v2, Options{DryRun: true})
	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/world=created", "Service/minecraft-server=created", "StatefulSet/minecraft-server=created"})
	assert.DeepEqual(t, names(res.Stale), []string{"PersistentVolumeClaim/config", "Service/minecraft", "StatefulSet/minecraft"})
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.DeepEqual(t, names(res.Skipped), []string{"PersistentVolumeClaim/config=skipped"})
	assert.DeepEqual(t, res.Inventory.ChangeIDs, []string{v2.ChangeID, v1.ChangeID})
	assert.Assert(t, !res.Inventory.Written)

	assert.Equal(t, live(t, "v1", "Service", ns, "minecraft").GetResourceVersion(), svc.GetResourceVersion())
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") != nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft-server") == nil)
	assert.Equal(t, secret(t, v1).ResourceVersion, before.ResourceVersion)
}

func TestPVCPruneProtection(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`)
	mustApply(t, d.render(), Options{})

	v2 := d.values(`{claim: "world"}`).render()
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Skipped), []string{"PersistentVolumeClaim/config=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "--prune-pvcs"))
	assert.Assert(t, live(t, "v1", "PersistentVolumeClaim", ns, "config") != nil)
	assert.Assert(t, is.Contains(secret(t, v2).latest(), "PersistentVolumeClaim/"+ns+"/config@app"), "kept claim stays recorded")

	res = mustApply(t, v2, Options{PrunePVCs: true})
	assert.DeepEqual(t, names(res.Pruned), []string{"PersistentVolumeClaim/config=deleted"})
	// The pvc-protection finalizer leaves it terminating without a controller.
	claim := live(t, "v1", "PersistentVolumeClaim", ns, "config")
	assert.Assert(t, claim == nil || claim.GetDeletionTimestamp() != nil)
	assert.Assert(t, !strings.Contains(strings.Join(secret(t, v2).latest(), ","), "/config@"))
}

// NoPrune keeps the stale set recorded, so the next apply still prunes it.
func TestNoPruneKeepsStaleRecorded(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
	mustApply(t, d.render(), Options{})

	v2 := d.values(`{name: "minecraft-server"}`).render()
	res := mustApply(t, v2, Options{NoPrune: true})
	assert.DeepEqual(t, names(res.Skipped), []string{"Service/minecraft=skipped", "StatefulSet/minecraft=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "--no-prune"))
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") != nil)
	assert.Equal(t, len(secret(t, v2).latest()), 5)

	res = mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Stale), []string{"Service/minecraft", "StatefulSet/minecraft"})
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.Equal(t, len(secret(t, v2).latest()), 3)
}

func TestMaxHistory(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "a"}`)
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		rel := d.values(`{name: "` + name + `"}`).render()
		mustApply(t, rel, Options{MaxHistory: 2})
		ids = append(ids, rel.ChangeID)
	}
	s := secret(t, d.render())
	assert.DeepEqual(t, s.Index, []string{ids[2], ids[1]})
	assert.DeepEqual(t, s.Keys, sorted(ids[2], ids[1], "index", "metadata"))
}

const selectorModule = `
#config: app: *"web" | string
#components: (#config.app): {
	core.#Workload
	spec: workload: {type: "stateless", name: "web", replicas: 1, container: image: "nginx:1.27"}
}
`

// A component rename changes a Deployment's selector, which is immutable:
// reported with the field, nothing written; with Force, re-created.
func TestImmutableFieldReportedThenForced(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", selectorModule).values(`{}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	before := live(t, "apps/v1", "Deployment", ns, "web")
	inv := secret(t, v1)

	v2 := d.values(`{app: "frontend"}`).render()
	res, err := Apply(t.Context(), cluster(t), v2, Options{})
	var ie *objects.ImmutableError
	assert.Assert(t, errors.As(err, &ie), "%v", err)
	assert.DeepEqual(t, ie.Fields, []string{"spec.selector"})
	assert.ErrorContains(t, err, "Deployment.apps/"+ns+"/web: cannot change immutable spec.selector")
	assert.DeepEqual(t, names(res.Applied), []string{"Deployment/web=failed"})
	assert.Equal(t, secret(t, v1).ResourceVersion, inv.ResourceVersion)

	res = mustApply(t, v2, Options{Force: true})
	assert.DeepEqual(t, names(res.Applied), []string{"Deployment/web=recreated"})
	assert.Equal(t, res.Counts.Recreated, 1)
	after := live(t, "apps/v1", "Deployment", ns, "web")
	assert.Assert(t, after.GetUID() != before.GetUID())
	sel, _, _ := unstructured.NestedString(after.Object, "spec", "selector", "matchLabels", "app.kubernetes.io/name")
	assert.Equal(t, sel, "frontend")
	assert.DeepEqual(t, secret(t, v2).latest(), []string{"Deployment/" + ns + "/web@frontend"})
}

// Prune deletes the stale set without applying anything and rewrites the
// latest change without what it deleted.
func TestPruneDeletesStaleOnly(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	v2 := d.values(`{name: "minecraft-server"}`).render()
	mustApply(t, v2, Options{NoPrune: true})
	svc := live(t, "v1", "Service", ns, "minecraft-server")

	// Dry run first: reports, changes nothing.
	res, err := Prune(t.Context(), cluster(t), v2, Options{DryRun: true})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") != nil)
	assert.Equal(t, len(secret(t, v2).latest()), 5)

	var events []Event
	res, err = Prune(t.Context(), cluster(t), v2, Options{Progress: func(e Event) { events = append(events, e) }})
	assert.NilError(t, err)
	assert.Assert(t, is.Len(res.Applied, 0), "prune applies nothing")
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.Equal(t, len(events), 2)
	assert.Equal(t, events[0].Phase, PhasePrune)
	assert.Equal(t, events[0].Line(), "statefulset.apps/minecraft deleted")
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") == nil)
	assert.Equal(t, live(t, "v1", "Service", ns, "minecraft-server").GetResourceVersion(), svc.GetResourceVersion())
	s := secret(t, v2)
	assert.Assert(t, is.DeepEqual(s.Index, []string{v2.ChangeID, v1.ChangeID}), "no new change")
	assert.DeepEqual(t, s.latest(), []string{
		"PersistentVolumeClaim/" + ns + "/config@app", "Service/" + ns + "/minecraft-server@app", "StatefulSet/" + ns + "/minecraft-server@app",
	})
}

func TestPruneWithoutInventory(t *testing.T) {
	ns := env.Namespace(t)
	rel := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`).render()
	res, err := Prune(t.Context(), cluster(t), rel, Options{})
	assert.NilError(t, err)
	assert.Equal(t, len(res.Warnings), 1)
	assert.Assert(t, is.Contains(res.Warnings[0], "no inventory Secret"))
	assert.Assert(t, secret(t, rel) == nil)
}

// An object added by a later change gets the same existence check as a
// first apply: it must not silently adopt an object someone else made.
func TestAddedObjectIsCheckedOnLaterApplies(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", threeComponentModule).values(`{cache: false}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	before := secret(t, v1)
	_, err := cluster(t).Clientset.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cache"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 6379}}},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)

	v2 := d.values(`{cache: true}`).render()
	_, err = Apply(t.Context(), cluster(t), v2, Options{})
	assert.ErrorContains(t, err, "Service/"+ns+"/cache already exists but is not tracked")
	assert.Assert(t, live(t, "apps/v1", "Deployment", ns, "cache") == nil, "nothing applied")
	assert.Equal(t, secret(t, v1).ResourceVersion, before.ResourceVersion)

	res := mustApply(t, v2, Options{Adopt: true})
	assert.Assert(t, is.Contains(names(res.Applied), "Service/cache=configured"))
	assert.Assert(t, is.Contains(secret(t, v2).latest(), "Service/"+ns+"/cache@cache"))
}

// A release into a namespace that does not exist yet (a fresh cluster)
// gets it created, as Timoni does; it is not recorded or pruned.
func TestReleaseNamespaceIsCreated(t *testing.T) {
	ns := env.Namespace(t) + "-fresh"
	t.Cleanup(func() {
		_ = cluster(t).Clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	rel := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`).render()

	var lines []string
	res := mustApply(t, rel, Options{DryRun: true, Progress: func(e Event) { lines = append(lines, e.Line()) }})
	assert.Assert(t, res.NamespaceCreated)
	assert.Equal(t, lines[0], "namespace/"+ns+" created (server dry run): the release's namespace (not recorded, never pruned)")
	assert.Equal(t, res.Counts.Created, 3)
	assert.Assert(t, live(t, "v1", "Namespace", "", ns) == nil, "dry run")

	res = mustApply(t, rel, Options{})
	assert.Assert(t, res.NamespaceCreated)
	assert.Assert(t, live(t, "v1", "Namespace", "", ns) != nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") != nil)
	assert.Assert(t, !strings.Contains(strings.Join(secret(t, rel).latest(), ","), "Namespace/"))

	res = mustApply(t, rel, Options{})
	assert.Assert(t, !res.NamespaceCreated)
}
