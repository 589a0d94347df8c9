// Package change is the vocabulary of a comparison — what a diff against
// the cluster and a review of two commits find, per object (manifest.Change)
// and per release (Release), summed (Counts) and for a whole operation
// (Set) — with what hides secrets in it: sealed identifiers, redacted
// warnings, hidden names ordered last.
package change

import (
	"slices"
	"strings"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Revision is a release's content identity on one side of a comparison.
type Revision struct {
	ManifestDigest string `json:"manifestDigest,omitempty"`
	ChangeID       string `json:"changeId,omitempty"`
}

// Counts sums object classes.
type Counts struct {
	Added     int `json:"added"`
	Modified  int `json:"modified"`
	Unchanged int `json:"unchanged"`
	Stale     int `json:"stale"`
	Ghost     int `json:"ghost"`
}

// Add counts one change.
func (c *Counts) Add(ch manifest.Action) {
	switch ch {
	case manifest.Added:
		c.Added++
	case manifest.Modified:
		c.Modified++
	case manifest.Unchanged:
		c.Unchanged++
	case manifest.Stale:
		c.Stale++
	case manifest.Ghost:
		c.Ghost++
	}
}

// AddAll adds another set of counts.
func (c *Counts) AddAll(o Counts) {
	c.Added += o.Added
	c.Modified += o.Modified
	c.Unchanged += o.Unchanged
	c.Stale += o.Stale
	c.Ghost += o.Ghost
}

// Changed reports whether anything would change.
func (c Counts) Changed() bool { return c.Added+c.Modified+c.Stale > 0 }

// Release is the diff or review of one release.
type Release struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	Environment string `json:"environment,omitempty"`
	// Group and Wave are the environment's (review of a fleet).
	Group     string `json:"group,omitempty"`
	Wave      int    `json:"wave,omitempty"`
	ReleaseID string `json:"releaseId"`
	// Base is the live inventory's current change (diff) or the base ref's
	// render (review); nil when there is none (first install, new release).
	Base *Revision `json:"base,omitempty"`
	Head Revision  `json:"head"`
	// Objects lists every object with its class, in apply order, stale and
	// ghosts last.
	Objects manifest.Compared `json:"objects"`
	// Highlights say in words what moves that a reviewer looks for first
	// (an image, replicas, a ConfigMap or Secret whose readers will not
	// restart); a review's only.
	Highlights []string `json:"highlights,omitempty"`
	Counts     Counts   `json:"counts"`
	Warnings   []string `json:"warnings,omitempty"`
	// Reach is where the head writes; BaseReach where the base wrote
	// (review; nil for a release the base does not render). A change
	// between them is also a warning.
	Reach     *Footprint `json:"reach,omitempty"`
	BaseReach *Footprint `json:"baseReach,omitempty"`
	// Error is set when this release could not be compared (for example an
	// environment's kubeContext missing from the kubeconfig); the others
	// are still reported.
	Error string `json:"error,omitempty"`
	// Unreachable is set with Error when the release's cluster could not
	// be selected or reached: nothing is known about it, it is not in sync.
	Unreachable bool `json:"unreachable,omitempty"`
	// Sensitive: either side's digest and change ID depend on secret data
	// (Secret objects, values from a secret source); public outputs seal them.
	Sensitive bool `json:"sensitive,omitempty"`
	// InputsIdentical: not rendered, because its input fingerprint equals
	// the other side's (review) or the recorded change's with nothing on
	// the cluster moved (diff); every object is unchanged.
	InputsIdentical bool `json:"inputsIdentical,omitempty"`

	// Key is the release's key in `releases` (Name may differ); not in
	// the JSON form, which names a release by Name.
	Key string `json:"-"`
}

// Set is the result of Diff and Review: every selected release.
type Set struct {
	// Operation is "diff" (render against the live cluster) or "review"
	// (render against a base ref); it picks the Markdown title and labels.
	Operation string    `json:"operation"`
	Releases  []Release `json:"releases"`
	Counts    Counts    `json:"counts"`
	// Unchanged are the release × environment units a review did not
	// render: their inputs are the same on both sides (not in Releases).
	Unchanged []UnchangedRelease `json:"unchanged,omitempty"`
	// BaseRef and BaseCommit say what a review from git compared with:
	// the ref that resolved and the merge base of it and HEAD.
	BaseRef    string `json:"baseRef,omitempty"`
	BaseCommit string `json:"baseCommit,omitempty"`
	// HeadUncommitted: a review from git took the head from the working
	// tree, which has uncommitted changes; they are part of the review.
	HeadUncommitted bool `json:"headUncommitted,omitempty"`

	// renders and cachedRenders count what the review needed and found
	// in the render cache (RenderCounts).
	renders, cachedRenders int
}

// RenderCounts is how many renders a review needed (one per side of each
// pair it reviewed, not the unchanged ones) and how many of them it read
// from the render cache instead of evaluating: its cache hits. Zero for a
// diff, and for a merged review (each shard counted its own).
func (cs *Set) RenderCounts() (renders, cached int) {
	return cs.renders, cs.cachedRenders
}

// StaleObjects lists the objects apply would prune, as
// "release: kind.group/namespace/name".
func (cs *Set) StaleObjects() []string {
	var out []string
	for _, rc := range cs.Releases {
		for _, o := range rc.Objects {
			if o.Action == manifest.Stale {
				out = append(out, rc.Name+": "+o.Ref.String())
			}
		}
	}
	return out
}

// SetRenderCounts records what RenderCounts returns (the review that
// made cs).
func (cs *Set) SetRenderCounts(renders, cached int) {
	cs.renders, cs.cachedRenders = renders, cached
}

// Footprint is where a release writes: the namespaces of its objects,
// sorted, and whether it renders cluster-scoped objects. (An
// environment's reach is what it may write: engine/render.Reach.)
type Footprint struct {
	Namespaces    []string `json:"namespaces"`
	ClusterScoped bool     `json:"clusterScoped"`
}

// ReachOf is the footprint of rendered objects (as they will be applied).
func ReachOf(res []manifest.Resource) *Footprint {
	r := &Footprint{Namespaces: []string{}}
	for _, o := range res {
		ns := o.Object.GetNamespace()
		switch {
		case ns == "":
			r.ClusterScoped = true
		case !slices.Contains(r.Namespaces, ns):
			r.Namespaces = append(r.Namespaces, ns)
		}
	}
	slices.Sort(r.Namespaces)
	return r
}

// Equal reports whether two reaches are the same.
func (r *Footprint) Equal(o *Footprint) bool {
	return r != nil && o != nil && r.ClusterScoped == o.ClusterScoped && slices.Equal(r.Namespaces, o.Namespaces)
}

// String is "namespaces a, b; cluster-scoped objects" (or "; no
// cluster-scoped objects").
func (r *Footprint) String() string {
	s := "namespaces " + strings.Join(r.Namespaces, ", ")
	if len(r.Namespaces) == 0 {
		s = "no namespace"
	}
	if r.ClusterScoped {
		return s + " and cluster-scoped objects"
	}
	return s
}

// UnchangedRelease is a release × environment a review did not render:
// its input fingerprints are equal on both sides, so are its renders.
type UnchangedRelease struct {
	Release     string `json:"release"`
	Environment string `json:"environment,omitempty"`
}
