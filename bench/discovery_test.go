//go:build bench

package bench

import (
	"fmt"
	"testing"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// reportDiscovery counts the API requests each discovery strategy needs to
// find the bench release's objects, each from a cold client (discovery
// documents included), as a new opm process would:
//
//	bench discovery-200 inventory=<n>req labels=<m>req ratio=<n/m>
func reportDiscovery(t *testing.T, env *kubetest.Env, namespace string) {
	t.Helper()
	cold := func() (*kube.Cluster, func() int64) {
		cfg, n := kubetest.CountingConfig(env.Config)
		cl, err := kube.FromConfig(cfg, "bench", kube.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return cl, n.Load
	}
	cl, count := cold()
	inv, err := inventory.Find(t.Context(), cl.Clientset, namespace, "bench", "")
	if err != nil || inv == nil {
		t.Fatalf("reading the bench release's inventory: %v", err)
	}
	found, _, err := discover.FromInventory(t.Context(), cl, inv.LatestEntries(), discover.Options{ReleaseID: inv.Release.ReleaseID})
	if err != nil {
		t.Fatal(err)
	}
	viaInventory := count()

	cl, count = cold()
	objs, _, err := discover.ByLabels(t.Context(), cl, discover.Query{Namespace: namespace, ReleaseName: "bench", ReleaseID: inv.Release.ReleaseID}, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	viaLabels := count()
	if len(found) != len(objs) {
		t.Fatalf("inventory found %d objects, the label scan %d", len(found), len(objs))
	}
	fmt.Printf("bench discovery-%d inventory=%dreq labels=%dreq ratio=%.2f\n", len(found), viaInventory, viaLabels, float64(viaInventory)/float64(viaLabels))
}
