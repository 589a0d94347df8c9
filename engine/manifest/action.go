package manifest

// Action is what happens to an object: the one vocabulary of apply
// results (JSON `action`), diffs and reviews (JSON `change`). A write
// (engine/objects, and in a dry run what it would do) reports created,
// configured, recreated, deleted, skipped or failed, as fluxcd/pkg/ssa's
// Action; a comparison that writes nothing (engine/preview, a review)
// reports added, modified, stale or ghost, words a write never uses,
// since a stale object is one an apply may or may not prune and a ghost
// one no write of this release made. Both report unchanged.
type Action string

// What a write did.
const (
	Created    Action = "created"
	Configured Action = "configured"
	// Recreated: deleted and created again to change an immutable field.
	Recreated Action = "recreated"
	Deleted   Action = "deleted"
	Skipped   Action = "skipped"
	Failed    Action = "failed"
)

// What a comparison finds.
const (
	Added    Action = "added"
	Modified Action = "modified"
	// Stale: recorded in the inventory, no longer rendered.
	Stale Action = "stale"
	// Ghost: carries the release's labels on the cluster, in neither the
	// inventory nor the render.
	Ghost Action = "ghost"
)

// Unchanged is both: nothing was written, or nothing would be.
const Unchanged Action = "unchanged"
