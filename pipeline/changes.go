package pipeline

import (
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/pipeline/change"
)

// Change is what a diff or a review finds for an object: manifest.Action,
// the one vocabulary of apply results, diffs and reviews, with the words
// of a comparison (below), so a diff against the cluster and a review of
// two commits speak the same.
type Change = manifest.Action

// What a diff or review finds.
const (
	// Added: rendered, not on the cluster (or not in the base ref).
	Added = manifest.Added
	// Modified: rendered and present, with differences.
	Modified = manifest.Modified
	// Unchanged: rendered and present, no differences.
	Unchanged = manifest.Unchanged
	// Stale: recorded in the inventory (or rendered by the base ref) but no
	// longer rendered, after the component-rename check: apply would prune it.
	Stale = manifest.Stale
	// Ghost: carries the release's labels on the cluster but is in neither
	// the inventory nor the render (a failed apply left it, RFC scenario F).
	Ghost = manifest.Ghost
)

// ObjectRef names one Kubernetes object and the component that made it:
// the engine's manifest.Ref, the one way every report names an object.
type ObjectRef = manifest.Ref

// ObjectChange is what happened, or would happen, to one object: the
// engine's one per-object outcome (manifest.Change) for apply, prune,
// delete, diff, review and smoke. Secret values never appear in its Diff:
// a changed value shows as a masked marker with before/after hashes.
type ObjectChange = manifest.Change

// Compared is a diff's or a review's list of object changes, spelled in
// JSON as they always were ({"object", "change", "diff", "warning"}).
type Compared = manifest.Compared

// A comparison's results, per release and for the whole operation
// (pipeline/change), under the names the front doors use.
type (
	// ChangeSet is the result of Diff and Review: every selected release.
	ChangeSet = change.Set
	// ReleaseChanges is the diff or review of one release.
	ReleaseChanges = change.Release
	// Counts sums object classes.
	Counts = change.Counts
	// Revision is a release's content identity on one side of a comparison.
	Revision = change.Revision
	// Footprint is where a release writes.
	Footprint = change.Footprint
	// UnchangedRelease is a release × environment a review did not render.
	UnchangedRelease = change.UnchangedRelease
)
