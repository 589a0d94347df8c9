package preview

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	pool "github.com/opmodel/pipeline/engine/workers"
)

// Prefetch reads, while the render still runs, what a preview reads from
// the cluster whatever the render gives: the inventory, the metadata of
// the objects its current change records and, with Options.Ghosts, that of
// the objects that carry the release's labels. Only the release's identity
// is needed to start it, so the cluster's latency overlaps CUE's CPU;
// Release then reads whole only the recorded objects it must diff (their
// render or their version moved) and the rendered ones the inventory does
// not record. Metadata, because most of a release is unchanged and told
// so by its resourceVersion: a diff of 1 000 objects of which 100 changed
// reads 100 whole, not 1 000.
type Prefetch struct {
	name, namespace, releaseID string
	ghosts                     bool // the label scan ran

	done *pool.Group // a panic of the prefetch is raised where it is waited for
	// invRead is closed once the inventory is read (invErr: how that
	// failed), before the objects it records are: whether they are worth
	// reading for a skip is decided on it alone.
	invRead chan struct{}
	invErr  error
	inv     *inventory.Inventory
	// recorded is what the cluster holds of each object the inventory's
	// current change records: metadata only (Found.Partial) until a
	// caller reads one whole (in place), at[id] its index.
	recorded []discover.Found
	at       map[manifest.ID]int
	labelled []*unstructured.Unstructured
	stats    discover.Stats
	err      error
}

// StartPrefetch starts reading for id, a release's identity (render's
// IdentityOnly, or a cached one).
func StartPrefetch(ctx context.Context, cl *kube.Cluster, id *render.Release, opts Options) *Prefetch {
	p := &Prefetch{name: id.Name, namespace: id.Namespace, releaseID: id.ReleaseID, ghosts: opts.Ghosts, done: &pool.Group{}, invRead: make(chan struct{})}
	workers := opts.workers()
	p.done.Go(func() {
		g, gctx := pool.WithContext(ctx)
		if opts.Ghosts {
			g.Go(func() error {
				var err error
				p.labelled, p.stats, err = discover.ByLabels(gctx, cl, discover.Query{Namespace: id.Namespace, ReleaseName: id.Name, ReleaseID: id.ReleaseID}, discover.Options{Workers: workers, MetadataOnly: true})
				return err
			})
		}
		g.Go(func() error {
			read := sync.OnceFunc(func() { close(p.invRead) })
			defer read() // also when the read panics
			inv, err := inventory.Read(gctx, cl.Clientset, inventory.Release{Name: id.Name, Namespace: id.Namespace, ReleaseID: id.ReleaseID, Environment: id.Environment})
			p.inv, p.invErr = inv, err
			read()
			if err != nil {
				return err
			}
			var entries []inventory.Entry
			if inv != nil { // nil: never applied
				entries, _ = inv.LatestWithin(id.Reach.Recorded())
			}
			// Metadata first: most recorded objects are told unchanged by
			// their resourceVersion, and only the others are read whole.
			found, _, err := discover.FromInventory(gctx, cl, entries, discover.Options{Workers: workers, ReleaseID: id.ReleaseID, MetadataOnly: true})
			if err != nil {
				return err
			}
			p.recorded, p.at = found, make(map[manifest.ID]int, len(found))
			for i, f := range found {
				p.at[f.Entry.ID] = i
			}
			return nil
		})
		p.err = g.Wait()
	})
	return p
}

// forRelease waits for the prefetch and returns it when it read rel's
// cluster state without error; nil means Release reads everything itself.
func (p *Prefetch) forRelease(rel *render.Release, ghosts bool) *Prefetch {
	if p == nil || !p.of(rel) || p.wait() != nil || (ghosts && !p.ghosts) {
		return nil
	}
	return p
}

// of reports whether p was started for rel's identity.
func (p *Prefetch) of(rel *render.Release) bool {
	return p.name == rel.Name && p.namespace == rel.Namespace && p.releaseID == rel.ReleaseID
}

// inventory waits for the inventory's read only and returns it (nil:
// never applied).
func (p *Prefetch) inventory() (*inventory.Inventory, error) {
	<-p.invRead
	return p.inv, p.invErr
}

// wait waits for the prefetch and returns what failed it.
func (p *Prefetch) wait() error {
	p.done.Wait()
	return p.err
}
