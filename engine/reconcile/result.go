package reconcile

import (
	"time"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/objects"
)

// Phase says which step an event belongs to.
type Phase string

// Phases.
const (
	PhaseApply Phase = "apply"
	PhasePrune Phase = "prune"
)

// objectOf is what a run reports of the resource manager's result: its
// change, an error said as the reason.
func objectOf(r objects.Result) manifest.Change {
	o := r.Change
	if r.Err != nil {
		o.Reason = r.Err.Error()
	}
	return o
}

func objectOfEntry(e inventory.Entry) manifest.Change {
	return manifest.Change{Ref: e.Ref()}
}

// Event reports one object as it is applied or pruned.
type Event struct {
	Release   string          `json:"release"`
	Namespace string          `json:"namespace"`
	Phase     Phase           `json:"phase"`
	Object    manifest.Change `json:"object"`
	DryRun    bool            `json:"dryRun,omitempty"`
	// Done of Total rendered objects have been applied, this one included
	// (apply phase; the release's namespace, created aside, counts in
	// neither): what a terminal's "N of M" line shows.
	Done  int `json:"done,omitempty"`
	Total int `json:"total,omitempty"`
}

// Counts sums the actions of one run.
type Counts struct {
	Created    int `json:"created"`
	Configured int `json:"configured"`
	Unchanged  int `json:"unchanged"`
	Recreated  int `json:"recreated"`
	Deleted    int `json:"deleted"`
	Skipped    int `json:"skipped"`
	Failed     int `json:"failed"`
	Stale      int `json:"stale"`
	// NotOurs counts stale objects kept because they do not carry the
	// release's id (recorded but not ours); they are in Skipped too.
	NotOurs int `json:"notOurs,omitempty"`
	// Ghosts counts the ghosts found (with PruneGhosts); they are also in
	// Pruned or Skipped.
	Ghosts int `json:"ghosts,omitempty"`
}

func (c *Counts) add(a manifest.Action) {
	switch a {
	case manifest.Created:
		c.Created++
	case manifest.Configured:
		c.Configured++
	case manifest.Unchanged:
		c.Unchanged++
	case manifest.Recreated:
		c.Recreated++
	case manifest.Deleted:
		c.Deleted++
	case manifest.Skipped:
		c.Skipped++
	case manifest.Failed:
		c.Failed++
	}
}

// Changes are what one apply or prune did, object by object: the lists
// engine and pipeline results both carry (pipeline.AppliedRelease).
type Changes struct {
	// Applied lists every rendered object reached, in apply order.
	Applied []manifest.Change `json:"applied"`
	// Stale is the stale set: recorded by the previous change, no longer
	// rendered (after the component-rename check), in delete order.
	Stale []manifest.Change `json:"stale"`
	// Pruned lists stale objects deleted (or that would be, in a dry run).
	Pruned []manifest.Change `json:"pruned"`
	// Skipped lists stale objects not deleted and why; they stay in the
	// inventory so a later run tries again.
	Skipped []manifest.Change `json:"skipped"`
	// Ghosts lists the ghosts found (with PruneGhosts): objects carrying
	// the release's id, neither recorded nor rendered.
	Ghosts []manifest.Change `json:"ghosts,omitempty"`
}

// NoChanges is Changes with every list empty but not nil, so each is
// printed as [] in JSON.
func NoChanges() Changes {
	return Changes{Applied: []manifest.Change{}, Stale: []manifest.Change{}, Pruned: []manifest.Change{}, Skipped: []manifest.Change{}}
}

// InventoryRef names the inventory Secret and its history after the run
// (what it would be, in a dry run).
type InventoryRef struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	ChangeIDs []string `json:"changeIds"`
	// Previous is the change the release ran before this run ("" on a
	// first apply): what a rollback of this run's change returns to.
	Previous string `json:"previous,omitempty"`
	// Written is false in a dry run and when the run failed before the write.
	Written bool `json:"written"`
	// Deleted is set when delete removed the inventory Secret.
	Deleted bool `json:"deleted,omitempty"`
}

// Result is what one apply or prune of one release did.
type Result struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	ReleaseID string `json:"releaseId"`
	// Cluster describes the cluster as the summary line names it.
	Cluster        string `json:"cluster"`
	Server         string `json:"server"`
	Context        string `json:"context,omitempty"`
	ManifestDigest string `json:"manifestDigest"`
	ChangeID       string `json:"changeId"`
	DryRun         bool   `json:"dryRun"`
	// FirstApply is true when the release had no inventory (or an empty one).
	FirstApply bool `json:"firstApply"`
	// NamespaceCreated is true when apply created the release's namespace
	// (would have, in a dry run), which holds the inventory Secret.
	NamespaceCreated bool `json:"namespaceCreated,omitempty"`
	Changes
	Inventory InventoryRef `json:"inventory"`
	Counts    Counts       `json:"counts"`
	// InputsIdentical is true when nothing was rendered: the inputs are
	// those of the recorded change and every object is as it left them.
	InputsIdentical bool          `json:"inputsIdentical,omitempty"`
	Duration        time.Duration `json:"-"`
	Warnings        []string      `json:"warnings,omitempty"`
}
