package reconcile

// One test per scenario (A–P) and edge case (3–7) of the release
// inventory RFC (004), each checking the cluster and the inventory Secret.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/render"
)

func mustApply(t *testing.T, rel *render.Release, opts Options) *Result {
	t.Helper()
	res, err := Apply(t.Context(), cluster(t), rel, opts)
	assert.NilError(t, err)
	return res
}

func TestScenarioA_Rename(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	oldSvc := live(t, "v1", "Service", ns, "minecraft")
	assert.Assert(t, oldSvc != nil)

	v2 := d.values(`{name: "minecraft-server"}`).render()
	res := mustApply(t, v2, Options{})

	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/config=unchanged", "Service/minecraft-server=created", "StatefulSet/minecraft-server=created"})
	assert.DeepEqual(t, names(res.Stale), []string{"Service/minecraft", "StatefulSet/minecraft"})
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.Equal(t, res.Pruned[0].Kind, "StatefulSet", "pruned in reverse weight order")
	assert.Equal(t, res.Counts, Counts{Created: 2, Unchanged: 1, Deleted: 2, Stale: 2})

	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") == nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") == nil)
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft-server") != nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft-server") != nil)
	assert.Assert(t, live(t, "v1", "PersistentVolumeClaim", ns, "config") != nil)

	s := secret(t, v2)
	assert.DeepEqual(t, s.Index, []string{v2.ChangeID, v1.ChangeID})
	assert.DeepEqual(t, s.latest(), []string{
		"PersistentVolumeClaim/" + ns + "/config@app", "Service/" + ns + "/minecraft-server@app", "StatefulSet/" + ns + "/minecraft-server@app",
	})
	assert.Equal(t, *s.Changes[v2.ChangeID].Values, v2.ValuesText)
	assert.Assert(t, is.Contains(v2.ValuesText, "minecraft-server"))
	assert.DeepEqual(t, res.Inventory, InventoryRef{Name: s.Name, Namespace: ns, ChangeIDs: []string{v2.ChangeID, v1.ChangeID}, Previous: v1.ChangeID, Written: true})
}

func TestScenarioB_PartialFailureWritesNothing(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	before := secret(t, v1)

	// The new Service has a targetPort the API server rejects.
	bad := d.values(`{name: "minecraft-server", badPort: true}`).render()
	res, err := Apply(t.Context(), cluster(t), bad, Options{})
	assert.ErrorContains(t, err, "Service/"+ns+"/minecraft-server")
	assert.ErrorContains(t, err, "nothing was pruned and the inventory was not written")
	assert.Equal(t, fault.KindOf(err), fault.Validation, "the API server's Invalid is a validation error")
	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/config=unchanged", "Service/minecraft-server=failed"})
	assert.DeepEqual(t, names(res.Pruned), []string{})
	assert.Equal(t, res.Inventory.Written, false)

	// Old objects still run; the new StatefulSet's stage was never reached.
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") != nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") != nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "minecraft-server") == nil)
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft-server") == nil)
	after := secret(t, v1)
	assert.Equal(t, after.ResourceVersion, before.ResourceVersion, "inventory not written")
	assert.DeepEqual(t, after.Index, []string{v1.ChangeID})

	// Fixed and re-run: the same stale set is pruned and the inventory advances.
	v2 := d.values(`{name: "minecraft-server"}`).render()
	res = mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") == nil)
	s := secret(t, v2)
	assert.DeepEqual(t, s.Index, []string{v2.ChangeID, v1.ChangeID})
	assert.Assert(t, is.Contains(s.latest(), "Service/"+ns+"/minecraft-server@app"))
}

const threeComponentModule = `
#config: cache: *true | bool
#components: {
	app: {
		core.#Workload
		core.#Service
		spec: {
			workload: {type: "stateless", replicas: 1, container: {image: "nginx:1.27", ports: http: containerPort: 80}}
			service: ports: http: port: 80
		}
	}
	worker: {core.#Workload, spec: workload: {type: "stateless", replicas: 1, container: image: "busybox:1.36"}}
	if #config.cache {
		cache: {
			core.#Workload
			core.#Service
			spec: {
				workload: {type: "stateless", replicas: 1, container: {image: "redis:7", ports: redis: containerPort: 6379}}
				service: ports: redis: port: 6379
			}
		}
	}
}
`

func TestScenarioC_ComponentRemoved(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", threeComponentModule).values(`{}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	assert.Equal(t, len(secret(t, v1).latest()), 5)

	v2 := d.values(`{cache: false}`).render()
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Stale), []string{"Deployment/cache", "Service/cache"})
	assert.DeepEqual(t, names(res.Pruned), []string{"Deployment/cache=deleted", "Service/cache=deleted"})
	assert.Assert(t, live(t, "apps/v1", "Deployment", ns, "cache") == nil)
	assert.Assert(t, live(t, "v1", "Service", ns, "cache") == nil)
	assert.Assert(t, live(t, "apps/v1", "Deployment", ns, "worker") != nil)
	assert.DeepEqual(t, secret(t, v2).latest(), []string{
		"Deployment/" + ns + "/app@app", "Deployment/" + ns + "/worker@worker", "Service/" + ns + "/app@app",
	})
}

func TestScenarioD_FirstApply(t *testing.T) {
	ns := env.Namespace(t)
	rel := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`).render()
	var events []Event
	now := time.Date(2026, 2, 11, 14, 30, 0, 0, time.UTC)
	res := mustApply(t, rel, Options{Progress: func(e Event) { events = append(events, e) }, Now: func() time.Time { return now }})

	assert.Assert(t, res.FirstApply)
	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/config=created", "Service/minecraft=created", "StatefulSet/minecraft=created"})
	assert.Equal(t, len(events), 3, "one progress event per object")
	assert.Equal(t, events[0].Line(), "persistentvolumeclaim/config created")
	assert.Equal(t, events[2].Line(), "statefulset.apps/minecraft created")
	assert.DeepEqual(t, res.Stale, []manifest.Change{})
	assert.Equal(t, res.Cluster, cluster(t).String())
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") != nil)

	s := secret(t, rel)
	assert.Equal(t, s.Name, "opm.minecraft."+rel.ReleaseID)
	assert.Equal(t, s.Type, "opmodel.dev/release")
	assert.DeepEqual(t, s.Labels, map[string]string{
		"app.kubernetes.io/managed-by":    "open-platform-model",
		"module.opmodel.dev/name":         "minecraft",
		"module.opmodel.dev/namespace":    ns,
		"module-release.opmodel.dev/name": "minecraft",
		"module-release.opmodel.dev/uuid": rel.ReleaseID,
		"opmodel.dev/component":           "inventory",
		"environment.opmodel.dev/name":    "test",
	})
	assert.DeepEqual(t, s.Metadata, map[string]any{
		"kind": "ModuleRelease", "apiVersion": "core.opmodel.dev/v1alpha1", "name": "minecraft", "namespace": ns,
		"releaseId": rel.ReleaseID, "lastTransitionTime": "2026-02-11T14:30:00Z",
	})
	assert.DeepEqual(t, s.Keys, []string{rel.ChangeID, "index", "metadata"})
	assert.DeepEqual(t, s.Index, []string{rel.ChangeID})
	c := s.Changes[rel.ChangeID]
	assert.Equal(t, c.Module.Path, "example.com/test/mod@v0")
	assert.Equal(t, c.Module.Version, "0.1.0")
	assert.Equal(t, c.Module.Name, "app")
	assert.Equal(t, c.ManifestDigest, rel.ManifestDigest)
	assert.Equal(t, c.Timestamp, "2026-02-11T14:30:00Z")
	assert.Equal(t, *c.Values, rel.ValuesText)
	// The RFC's fields, exactly; Applied is the additive skip record.
	for i := range c.Inventory.Entries {
		assert.Assert(t, c.Inventory.Entries[i].Applied != nil)
		c.Inventory.Entries[i].Applied = nil
	}
	assert.DeepEqual(t, c.Inventory.Entries, inventory.Entries(rel.Resources))
	assert.Equal(t, c.Inventory.Entries[2], inventory.Entry{ID: manifest.ID{Group: "apps", Kind: "StatefulSet", Namespace: ns, Name: "minecraft"}, V: "v1", Component: "app"})
}

func TestScenarioE_InventorySecretDeleted(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	cs := cluster(t).Clientset
	assert.NilError(t, cs.CoreV1().Secrets(ns).Delete(t.Context(), secret(t, v1).Name, metav1.DeleteOptions{}))

	v2 := d.values(`{name: "minecraft-server"}`).render()
	res := mustApply(t, v2, Options{})
	assert.Assert(t, res.FirstApply)
	assert.Assert(t, is.DeepEqual(res.Stale, []manifest.Change{}), "no inventory, nothing known to prune")
	// The old objects are orphans, still labelled for label-based discovery.
	old := live(t, "apps/v1", "StatefulSet", ns, "minecraft")
	assert.Assert(t, old != nil)
	assert.Equal(t, old.GetLabels()[manifest.LabelReleaseUUID], v2.ReleaseID)
	s := secret(t, v2)
	assert.Assert(t, is.DeepEqual(s.Index, []string{v2.ChangeID}), "Secret recreated with only this change")
	assert.Assert(t, !strings.Contains(strings.Join(s.latest(), ","), "/minecraft@"))
}

func TestScenarioG_KindChange(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{kind: "stateless"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	assert.Assert(t, live(t, "apps/v1", "Deployment", ns, "minecraft") != nil)

	v2 := d.values(`{kind: "stateful"}`).render()
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Stale), []string{"Deployment/minecraft"})
	assert.DeepEqual(t, names(res.Pruned), []string{"Deployment/minecraft=deleted"})
	assert.Assert(t, live(t, "apps/v1", "Deployment", ns, "minecraft") == nil)
	assert.Assert(t, live(t, "apps/v1", "StatefulSet", ns, "minecraft") != nil)
	assert.DeepEqual(t, secret(t, v2).latest(), []string{
		"PersistentVolumeClaim/" + ns + "/config@app", "Service/" + ns + "/minecraft@app", "StatefulSet/" + ns + "/minecraft@app",
	})
}

func TestScenarioH_IdempotentReapply(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`)
	now := clock()
	v1 := d.render()
	mustApply(t, v1, Options{Now: now})
	first := secret(t, v1)
	// What opm's apply recorded on each object: the controllers' status
	// writes move the resourceVersion of a workload, but not this.
	opmWrite := func(u *unstructured.Unstructured) string {
		for _, m := range u.GetManagedFields() {
			if m.Manager == objects.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
				return m.Time.String() + " " + string(m.FieldsV1.Raw)
			}
		}
		return "no apply by " + objects.FieldManager
	}
	rvs := map[string]string{}
	for _, r := range v1.Resources {
		rvs[r.ID().String()] = opmWrite(live(t, r.Object.GetAPIVersion(), r.Object.GetKind(), ns, r.Object.GetName()))
	}

	again := d.render()
	assert.Equal(t, again.ChangeID, v1.ChangeID)
	res := mustApply(t, again, Options{Now: now})
	assert.Equal(t, res.Counts, Counts{Unchanged: 3})
	for _, r := range v1.Resources {
		got := opmWrite(live(t, r.Object.GetAPIVersion(), r.Object.GetKind(), ns, r.Object.GetName()))
		assert.Equal(t, got, rvs[r.ID().String()], "%s was written on an unchanged re-apply", r.ID())
	}
	second := secret(t, v1)
	assert.Assert(t, is.DeepEqual(second.Index, []string{v1.ChangeID}), "no growth")
	assert.Assert(t, second.Changes[v1.ChangeID].Timestamp > first.Changes[v1.ChangeID].Timestamp, "timestamp updated")

	// A module upgrade is a new change, even with the same values.
	v2 := d.module("0.2.0", minecraftModule).render()
	assert.Assert(t, v2.ChangeID != v1.ChangeID)
	mustApply(t, v2, Options{Now: now})
	assert.DeepEqual(t, secret(t, v2).Index, []string{v2.ChangeID, v1.ChangeID})
	assert.Equal(t, secret(t, v2).Changes[v2.ChangeID].Module.Version, "0.2.0")

	// Back to 0.1.0: the old change moves to the front, no duplicate.
	mustApply(t, d.module("0.1.0", minecraftModule).render(), Options{Now: now})
	assert.DeepEqual(t, secret(t, v1).Index, []string{v1.ChangeID, v2.ChangeID})
}

func TestScenarioI_LocalTemplateChange(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`)
	v1 := d.render()
	mustApply(t, v1, Options{})

	// Same version, same values; the template gains a port.
	v2 := d.module("0.1.0", strings.Replace(minecraftModule, "ports: game: {", "ports: rcon: port: 25575\n\t\tports: game: {", 1)).render()
	assert.Equal(t, v2.ValuesText, v1.ValuesText)
	assert.Assert(t, v2.ManifestDigest != v1.ManifestDigest)
	assert.Assert(t, v2.ChangeID != v1.ChangeID)
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/config=unchanged", "Service/minecraft=configured", "StatefulSet/minecraft=unchanged"})
	s := secret(t, v2)
	assert.DeepEqual(t, s.Index, []string{v2.ChangeID, v1.ChangeID})
	assert.Equal(t, s.Changes[v2.ChangeID].ManifestDigest, v2.ManifestDigest)
	ports, _, _ := unstructuredSlice(live(t, "v1", "Service", ns, "minecraft").Object, "spec", "ports")
	assert.Equal(t, len(ports), 2)
}

const renamableComponentModule = `
#config: component: *"app" | string
#components: (#config.component): {
	core.#Service
	core.#Configs
	spec: {
		service: {name: "minecraft", ports: game: port: 25565}
		configs: "minecraft-settings": data: difficulty: "normal"
	}
}
`

func TestScenarioJ_ComponentRename(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", renamableComponentModule).values(`{component: "app"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	uid := live(t, "v1", "Service", ns, "minecraft").GetUID()

	v2 := d.values(`{component: "server"}`).render()
	res := mustApply(t, v2, Options{})
	assert.Assert(t, is.DeepEqual(res.Stale, []manifest.Change{}), "a component rename is not stale")
	assert.DeepEqual(t, res.Pruned, []manifest.Change{})
	svc := live(t, "v1", "Service", ns, "minecraft")
	assert.Equal(t, svc.GetUID(), uid, "same object, never deleted")
	assert.Equal(t, svc.GetLabels()["component.opmodel.dev/name"], "server")
	assert.DeepEqual(t, secret(t, v2).latest(), []string{
		"ConfigMap/" + ns + "/minecraft-settings@server", "Service/" + ns + "/minecraft@server",
	})
}

func TestScenarioK_PreexistingUntrackedObject(t *testing.T) {
	ns := env.Namespace(t)
	rel := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`).render()
	cs := cluster(t).Clientset
	_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc("config"), metav1.CreateOptions{})
	assert.NilError(t, err)

	for _, opts := range []Options{{}, {NoPrune: true}} {
		_, err = Apply(t.Context(), cluster(t), rel, opts)
		assert.ErrorContains(t, err, "PersistentVolumeClaim/"+ns+"/config already exists but is not tracked by release minecraft")
		assert.ErrorContains(t, err, "--adopt")
		assert.ErrorContains(t, err, "nothing was applied")
		assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") == nil, "no object touched (NoPrune=%v)", opts.NoPrune)
		assert.Assert(t, secret(t, rel) == nil)
	}

	res := mustApply(t, rel, Options{Adopt: true})
	assert.DeepEqual(t, names(res.Applied), []string{"PersistentVolumeClaim/config=configured", "Service/minecraft=created", "StatefulSet/minecraft=created"})
	adopted := live(t, "v1", "PersistentVolumeClaim", ns, "config")
	assert.Equal(t, adopted.GetLabels()[manifest.LabelReleaseUUID], rel.ReleaseID)
	assert.Assert(t, is.Contains(secret(t, rel).latest(), "PersistentVolumeClaim/"+ns+"/config@app"))
}

func TestScenarioL_TerminatingObject(t *testing.T) {
	ns := env.Namespace(t)
	rel := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{}`).render()
	cs := cluster(t).Clientset
	p := pvc("config")
	p.Finalizers = []string{"example.com/hold"}
	_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), p, metav1.CreateOptions{})
	assert.NilError(t, err)
	removeFinalizers(t, "v1", "PersistentVolumeClaim", ns, "config")
	assert.NilError(t, cs.CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), "config", metav1.DeleteOptions{}))

	for _, opts := range []Options{{}, {Adopt: true}} {
		_, err = Apply(t.Context(), cluster(t), rel, opts)
		var te *objects.TerminatingError
		assert.Assert(t, errors.As(err, &te), "Adopt=%v: %v", opts.Adopt, err)
		assert.ErrorContains(t, err, "PersistentVolumeClaim/"+ns+"/config is being deleted")
		assert.Assert(t, live(t, "v1", "Service", ns, "minecraft") == nil)
		assert.Assert(t, secret(t, rel) == nil)
	}
}

func TestScenarioM_CrossNamespaceMigration(t *testing.T) {
	relNS, games, production := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	v1 := direct(t, "minecraft", relNS, configMapDoc(games, "minecraft"))
	mustApply(t, v1, Options{})
	v2 := direct(t, "minecraft", relNS, configMapDoc(production, "minecraft"))

	// A user who may apply in production but not delete in games: the
	// prune is a warning naming the object, which stays recorded.
	limited := limitedCluster(t, relNS, games, production)
	res, err := Apply(t.Context(), limited, v2, Options{})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(res.Skipped), []string{"ConfigMap/minecraft=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "forbidden"))
	assert.Equal(t, len(res.Warnings), 1)
	assert.Assert(t, is.Contains(res.Warnings[0], "ConfigMap/"+games+"/minecraft was not pruned"))
	assert.Assert(t, live(t, "v1", "ConfigMap", games, "minecraft") != nil)
	assert.Assert(t, live(t, "v1", "ConfigMap", production, "minecraft") != nil)
	assert.DeepEqual(t, secret(t, v2).latest(), sorted(
		"ConfigMap/"+games+"/minecraft@app", "ConfigMap/"+production+"/minecraft@app",
	))

	// With the permission, the next apply prunes it from the old namespace.
	res = mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/minecraft=deleted"})
	assert.Equal(t, res.Pruned[0].Namespace, games)
	assert.Assert(t, live(t, "v1", "ConfigMap", games, "minecraft") == nil)
	assert.DeepEqual(t, secret(t, v2).latest(), []string{"ConfigMap/" + production + "/minecraft@app"})
}

func TestScenarioN_CRDAndCustomResource(t *testing.T) {
	ns := env.Namespace(t)
	group := ns + ".example.com"
	rel := direct(t, "widgets", ns, crdDoc(group), fmt.Sprintf(`
apiVersion: %s/v1
kind: Widget
metadata: {name: my-widget, namespace: NS}
spec: {size: 2}
`, group))
	t.Cleanup(func() {
		_ = cluster(t).Dynamic.Resource(crdGVR).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})

	res := mustApply(t, rel, Options{})
	assert.DeepEqual(t, names(res.Applied), []string{"CustomResourceDefinition/widgets." + group + "=created", "Widget/my-widget=created"})
	assert.Assert(t, live(t, group+"/v1", "Widget", ns, "my-widget") != nil)
	assert.DeepEqual(t, secret(t, rel).latest(), []string{
		"CustomResourceDefinition//widgets." + group + "@app", "Widget/" + ns + "/my-widget@app",
	})
}

func TestScenarioO_NamespacePruneProtection(t *testing.T) {
	ns := env.Namespace(t)
	games := ns + "-games"
	nsDoc := "# component: infra\napiVersion: v1\nkind: Namespace\nmetadata: {name: " + games + "}\n"
	v1 := direct(t, "minecraft", ns, nsDoc, configMapDoc(games, "minecraft"), configMapDoc(ns, "keep"))
	t.Cleanup(func() {
		_ = cluster(t).Clientset.CoreV1().Namespaces().Delete(context.Background(), games, metav1.DeleteOptions{})
	})
	res := mustApply(t, v1, Options{})
	assert.Equal(t, res.Applied[0].Kind, "Namespace", "Namespaces first")

	v2 := direct(t, "minecraft", ns, configMapDoc(ns, "keep"))
	res = mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Stale), []string{"ConfigMap/minecraft", "Namespace/" + games})
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/minecraft=deleted"})
	assert.DeepEqual(t, names(res.Skipped), []string{"Namespace/" + games + "=skipped"})
	assert.Assert(t, is.Contains(res.Skipped[0].Reason, "--prune-namespaces"))
	gns := live(t, "v1", "Namespace", "", games)
	assert.Assert(t, gns != nil && gns.GetDeletionTimestamp() == nil, "namespace untouched")
	// The skipped Namespace stays recorded, so a later run tries again.
	assert.DeepEqual(t, secret(t, v2).latest(), []string{
		"ConfigMap/" + ns + "/keep@app", "Namespace//" + games + "@infra",
	})

	res = mustApply(t, v2, Options{PruneNamespaces: true})
	assert.DeepEqual(t, names(res.Pruned), []string{"Namespace/" + games + "=deleted"})
	gns = live(t, "v1", "Namespace", "", games)
	assert.Assert(t, gns == nil || gns.GetDeletionTimestamp() != nil, "namespace deleted (envtest leaves it terminating)")
	assert.DeepEqual(t, secret(t, v2).latest(), []string{"ConfigMap/" + ns + "/keep@app"})
}

const optionalModule = `
#config: enabled: *true | bool
#components: {
	if #config.enabled {
		app: {
			core.#Service
			core.#Configs
			spec: {
				service: ports: http: port: 80
				configs: "app-settings": data: level: "info"
			}
		}
	}
}
`

func TestScenarioP_EmptyRenderRefused(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", optionalModule).values(`{}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	before := secret(t, v1)

	empty := d.values(`{enabled: false}`).render()
	assert.Equal(t, len(empty.Resources), 0)
	for _, run := range []func(context.Context, *render.Release, Options) (*Result, error){
		func(ctx context.Context, rel *render.Release, o Options) (*Result, error) {
			return Apply(ctx, cluster(t), rel, o)
		},
		func(ctx context.Context, rel *render.Release, o Options) (*Result, error) {
			return Prune(ctx, cluster(t), rel, o)
		},
	} {
		_, err := run(t.Context(), empty, Options{})
		assert.ErrorContains(t, err, "rendered no objects, but its inventory records 2")
		assert.ErrorContains(t, err, "--force")
		assert.Equal(t, fault.KindOf(err), fault.Validation)
		assert.Assert(t, live(t, "v1", "Service", ns, "app") != nil)
		assert.Equal(t, secret(t, v1).ResourceVersion, before.ResourceVersion)
	}

	res := mustApply(t, empty, Options{Force: true})
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/app-settings=deleted", "Service/app=deleted"})
	assert.Assert(t, live(t, "v1", "Service", ns, "app") == nil)
	s := secret(t, empty)
	assert.DeepEqual(t, s.Index, []string{empty.ChangeID, v1.ChangeID})
	assert.DeepEqual(t, s.latest(), []string{})
}

// Edge case 3: the inventory Secret carries OPM labels but is told apart
// by opmodel.dev/component=inventory, and is never part of the release's
// objects.
func TestEdge3_InventorySecretInLabelQueries(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", `
#components: app: {core.#Secrets, spec: secrets: "app-credentials": data: password: "hunter2"}
`).values(`{}`)
	rel := d.render()
	mustApply(t, rel, Options{})
	cs := cluster(t).Clientset
	list := func(sel string) []string {
		l, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
		assert.NilError(t, err)
		var out []string
		for _, s := range l.Items {
			out = append(out, s.Name)
		}
		return out
	}
	uuid := manifest.LabelReleaseUUID + "=" + rel.ReleaseID
	assert.DeepEqual(t, list(uuid+","+inventory.LabelComponent+"!=inventory"), []string{"app-credentials"})
	assert.DeepEqual(t, list(uuid+","+inventory.LabelComponent+"=inventory"), []string{"opm.minecraft." + rel.ReleaseID})
	s := secret(t, rel)
	_, hasComponentName := s.Labels["component.opmodel.dev/name"]
	assert.Assert(t, !hasComponentName, "not labelled as a rendered component")
	// Re-applying never counts the inventory Secret as stale or rendered.
	res := mustApply(t, d.render(), Options{})
	assert.DeepEqual(t, res.Stale, []manifest.Change{})
	assert.DeepEqual(t, secret(t, rel).latest(), []string{"Secret/" + ns + "/app-credentials@app"})
}

// Edge case 4: stale objects already deleted by hand prune as done.
func TestEdge4_StaleAlreadyDeleted(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})
	cs := cluster(t).Clientset
	assert.NilError(t, cs.CoreV1().Services(ns).Delete(t.Context(), "minecraft", metav1.DeleteOptions{}))
	assert.NilError(t, cs.AppsV1().StatefulSets(ns).Delete(t.Context(), "minecraft", metav1.DeleteOptions{}))

	v2 := d.values(`{name: "minecraft-server"}`).render()
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Pruned), []string{"Service/minecraft=deleted", "StatefulSet/minecraft=deleted"})
	assert.Equal(t, res.Pruned[0].Reason, "already gone")
	assert.DeepEqual(t, secret(t, v2).latest(), []string{
		"PersistentVolumeClaim/" + ns + "/config@app", "Service/" + ns + "/minecraft-server@app", "StatefulSet/" + ns + "/minecraft-server@app",
	})
}

// Edge case 5: two applies of the same release race from the same prior
// state. Exactly one writes the inventory; the other fails with the
// conflict message; the Secret holds the winner's change and the history
// before it.
func TestEdge5_ConcurrentApplies(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(fmt.Sprintf("first-apply=%v", first), func(t *testing.T) {
			ns := env.Namespace(t)
			d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{name: "minecraft"}`)
			v1 := d.render()
			if !first {
				mustApply(t, v1, Options{})
			}
			a := d.values(`{name: "minecraft-a"}`).render()
			b := d.values(`{name: "minecraft-b"}`).render()

			// Both read the inventory before either writes: each run waits
			// at its first progress event (after its read) for the other.
			var read sync.WaitGroup
			read.Add(2)
			barrier := func() func(Event) {
				var once sync.Once
				return func(Event) { once.Do(func() { read.Done(); read.Wait() }) }
			}
			results := make([]error, 2)
			var wg sync.WaitGroup
			for i, rel := range []*render.Release{a, b} {
				wg.Go(func() {
					_, results[i] = Apply(context.Background(), cluster(t), rel, Options{Progress: barrier()})
				})
			}
			wg.Wait()

			assert.Assert(t, (results[0] == nil) != (results[1] == nil), "exactly one apply must win: %v", results)
			winner, loserErr := a, results[1]
			if results[0] != nil {
				winner, loserErr = b, results[0]
			}
			var conflict *inventory.ConflictError
			assert.Assert(t, errors.As(loserErr, &conflict), "%v", loserErr)
			assert.ErrorContains(t, loserErr, "another apply of this release")
			assert.ErrorContains(t, loserErr, "re-run")

			s := secret(t, winner)
			want := []string{winner.ChangeID}
			if !first {
				want = append(want, v1.ChangeID)
			}
			assert.DeepEqual(t, s.Index, want)
			assert.DeepEqual(t, entryNames(s.Changes[winner.ChangeID].Inventory.Entries), entryNames(inventory.Entries(winner.Resources)))

			// The loser's retry converges on top of the winner.
			loser := a
			if winner == a {
				loser = b
			}
			mustApply(t, loser, Options{})
			assert.Equal(t, secret(t, loser).Index[0], loser.ChangeID)
		})
	}
}

// Edge case 6: a stale entry recorded with an API version the server no
// longer serves is deleted through the preferred version.
func TestEdge6_APIVersionMigration(t *testing.T) {
	ns := env.Namespace(t)
	d := newDeployment(t, ns).module("0.1.0", minecraftModule).values(`{kind: "stateless"}`)
	v1 := d.render()
	mustApply(t, v1, Options{})

	// Record the Deployment as an older inventory would have: apps/v1beta1,
	// which the server no longer serves.
	cs := cluster(t).Clientset
	inv, err := inventory.Read(t.Context(), cs, inventory.Release{Name: v1.Name, Namespace: ns, ReleaseID: v1.ReleaseID, Environment: "test"})
	assert.NilError(t, err)
	entries := inv.LatestEntries()
	for i := range entries {
		if entries[i].Kind == "Deployment" {
			entries[i].V = "v1beta1"
		}
	}
	assert.NilError(t, inventory.Write(t.Context(), cs, inv))
	_, err = cluster(t).Mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1beta1")
	assert.Assert(t, meta.IsNoMatchError(err), "apps/v1beta1 must not be served for this test to mean anything: %v", err)

	v2 := d.values(`{kind: "stateful"}`).render()
	res := mustApply(t, v2, Options{})
	assert.DeepEqual(t, names(res.Pruned), []string{"Deployment/minecraft=deleted"})
	assert.Equal(t, res.Pruned[0].Version, "v1", "deleted through the preferred version")
	assert.Equal(t, res.Pruned[0].Reason, "", "really deleted, not already gone")
	assert.Assert(t, live(t, "apps/v1", "Deployment", ns, "minecraft") == nil)
	assert.Assert(t, !strings.Contains(strings.Join(secret(t, v2).latest(), ","), "Deployment/"))
}

// Edge case 7: a stale object with a finalizer goes Terminating; prune
// does not wait for it.
func TestEdge7_FinalizerDoesNotBlockPrune(t *testing.T) {
	ns := env.Namespace(t)
	held := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: NS, finalizers: [example.com/hold]}\ndata: {k: v}\n"
	v1 := direct(t, "app", ns, held, configMapDoc(ns, "keep"))
	mustApply(t, v1, Options{})
	removeFinalizers(t, "v1", "ConfigMap", ns, "held")

	v2 := direct(t, "app", ns, configMapDoc(ns, "keep"))
	// A prune that waited would wait out WaitTimeout (10 min): half of
	// it is far beyond any busy machine's two ConfigMaps, and far short
	// of a wait.
	start := time.Now()
	res := mustApply(t, v2, Options{WaitTimeout: 10 * time.Minute})
	assert.Assert(t, time.Since(start) < 5*time.Minute, "prune waited on a finalizer")
	assert.DeepEqual(t, names(res.Pruned), []string{"ConfigMap/held=deleted"})
	cm := live(t, "v1", "ConfigMap", ns, "held")
	assert.Assert(t, cm != nil && cm.GetDeletionTimestamp() != nil, "left terminating")
	assert.DeepEqual(t, secret(t, v2).latest(), []string{"ConfigMap/" + ns + "/keep@app"})
}
