package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

var pvcs = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

func exists(t *testing.T, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := dyn().Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	assert.NilError(t, err)
	return true
}

func deleteRelease(t *testing.T, opts pipeline.DeleteOptions) *pipeline.DeleteResult {
	t.Helper()
	opts.ClusterOptions = cluster(t)
	res, err := pipeline.Delete(t.Context(), opts)
	assert.NilError(t, err)
	assert.Equal(t, len(res.Releases), 1)
	return res
}

func TestDeleteByNameThenAgain(t *testing.T) {
	ns := env.Namespace(t)
	applied := applyDir(t, deploytest.Dir(t, ns, ""))

	dry := deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Name: "app", Namespace: ns}, DryRun: true})
	assert.Equal(t, len(dry.Releases[0].Objects), 3)
	assert.Check(t, exists(t, deployments, ns, "app"), "dry run deletes nothing")
	assert.Check(t, exists(t, secrets, ns, inventory.SecretName("app", applied.ReleaseID)))

	res := deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Name: "app", Namespace: ns}, Wait: true})
	r := res.Releases[0]
	assert.Equal(t, r.Discovery, "inventory")
	assert.Equal(t, len(r.Deleted), 3)
	// Reverse apply order: Deployment (100), Service (50), Secret (15).
	assert.DeepEqual(t, []string{r.Objects[0].Kind, r.Objects[1].Kind, r.Objects[2].Kind}, []string{"Deployment", "Service", "Secret"})
	assert.Check(t, r.Inventory.Deleted)
	for gvr, name := range map[schema.GroupVersionResource]string{deployments: "app", services: "app", secrets: "app-creds"} {
		assert.Check(t, !exists(t, gvr, ns, name), "%s %s still exists", gvr.Resource, name)
	}
	assert.Check(t, !exists(t, secrets, ns, inventory.SecretName("app", applied.ReleaseID)), "the inventory goes last")

	again := deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Name: "app", Namespace: ns}})
	assert.Check(t, again.Releases[0].NothingToDelete)
	assert.Check(t, is.Contains(report.DeletedLine(again.Releases[0]), "nothing to delete"))
}

func TestDeleteByReleaseID(t *testing.T) {
	ns := env.Namespace(t)
	applied := applyDir(t, deploytest.Dir(t, ns, ""))
	res := deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{ReleaseID: applied.ReleaseID, Namespace: ns}})
	assert.Equal(t, res.Releases[0].Name, "app")
	assert.Equal(t, len(res.Releases[0].Deleted), 3)
	assert.Check(t, !exists(t, deployments, ns, "app"))
}

func TestDeleteWithoutInventoryUsesLabels(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, "")
	applied := applyDir(t, dir)
	assert.NilError(t, dyn().Resource(secrets).Namespace(ns).Delete(t.Context(), inventory.SecretName("app", applied.ReleaseID), metav1.DeleteOptions{}))

	res := deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir}}})
	assert.Equal(t, res.Releases[0].Discovery, "labels")
	assert.Equal(t, len(res.Releases[0].Deleted), 3)
	assert.Check(t, !exists(t, services, ns, "app"))
}

// PersistentVolumeClaims stay without --prune-pvcs, and the inventory
// stays with just them, so a later delete with the flag can finish.
func TestDeleteKeepsPVCsUnlessAsked(t *testing.T) {
	ns := env.Namespace(t)
	module := deploytest.AppModule + "\n#components: (#config.component): {core.#Volumes, spec: volumes: data: size: \"1Gi\"}\n"
	dir := deploytest.Write(t, map[string]string{"app/app.cue": module, "deploy.cue": deploytestRoot(ns)})
	applied := applyDir(t, dir)
	assert.Check(t, exists(t, pvcs, ns, "data"))

	res := deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Name: "app", Namespace: ns}})
	r := res.Releases[0]
	assert.Equal(t, len(r.Skipped), 1)
	assert.Equal(t, r.Skipped[0].Kind, "PersistentVolumeClaim")
	assert.Check(t, exists(t, pvcs, ns, "data"))
	assert.Check(t, r.Inventory.Written && !r.Inventory.Deleted)
	assert.Check(t, exists(t, secrets, ns, inventory.SecretName("app", applied.ReleaseID)))

	// A finalizer of the test's own holds the claim terminating, however
	// fast the pvc-protection controller releases it.
	hold := []byte(`{"metadata":{"finalizers":["opmodel.dev/test-hold"]}}`)
	_, err := dyn().Resource(pvcs).Namespace(ns).Patch(t.Context(), "data", types.MergePatchType, hold, metav1.PatchOptions{})
	assert.NilError(t, err)
	t.Cleanup(func() {
		release := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = dyn().Resource(pvcs).Namespace(ns).Patch(context.Background(), "data", types.MergePatchType, release, metav1.PatchOptions{})
	})
	res = deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Name: "app", Namespace: ns}, Protection: pipeline.Protection{PrunePVCs: true}})
	assert.Equal(t, len(res.Releases[0].Deleted), 1)
	assert.Check(t, res.Releases[0].Inventory.Deleted)

	// Deleting again has nothing to do: the claim is still terminating and
	// found by its labels, but it is already going, and delete says so.
	res = deleteRelease(t, pipeline.DeleteOptions{Target: pipeline.Target{Name: "app", Namespace: ns}, Protection: pipeline.Protection{PrunePVCs: true}})
	assert.Check(t, res.Releases[0].NothingToDelete)
	assert.Check(t, is.Contains(strings.Join(res.Releases[0].Warnings, "\n"), "already being deleted"))
}

func TestDeleteNeedsNamespaceWithName(t *testing.T) {
	_, err := pipeline.Delete(t.Context(), pipeline.DeleteOptions{Target: pipeline.Target{ReleaseID: "x"}, ClusterOptions: cluster(t)})
	assert.ErrorContains(t, err, "--namespace is required")
}

func deploytestRoot(ns string) string {
	return `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: app: {#module: appmodule, metadata: namespace: "` + ns + `"}
`
}
