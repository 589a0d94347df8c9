package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/opmodel/pipeline/pipeline"
)

// Summary is the one-line description of a rendered release.
func RenderedLine(r pipeline.RenderedRelease) string {
	env := r.Environment
	if env == "" {
		env = "-"
	}
	return fmt.Sprintf("release %s env=%s namespace=%s id=%s digest=%s change=%s resources=%d",
		r.Name, env, r.Namespace, r.ReleaseID, r.ManifestDigest, r.ChangeID, len(r.Resources))
}

// Summary is the final line of one release: what happened, where, and
// the identity of what is now recorded.
func AppliedLine(r pipeline.AppliedRelease) string {
	name := r.Name
	if r.Environment != "" {
		// Parallel waves print side by side: every line says where.
		name += " (environment " + r.Environment + ")"
	}
	if r.Error != "" && r.Cluster.Server == "" {
		return fmt.Sprintf("release %s: %s not attempted, its cluster could not be selected", name, r.Operation)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "release %s ", name)
	switch {
	case r.Error != "":
		fmt.Fprintf(&b, "%s failed", r.Operation)
		if r.DryRun {
			b.WriteString(" (server dry run)")
		}
	case r.InputsIdentical:
		b.WriteString("unchanged (inputs identical)")
		if r.DryRun {
			b.WriteString(" (server dry run)")
		}
	case r.DryRun:
		fmt.Fprintf(&b, "%s (server dry run, nothing written)", r.Operation)
	case r.Operation == "prune":
		b.WriteString("pruned")
	default:
		b.WriteString("applied")
	}
	fmt.Fprintf(&b, " on %s", r.Cluster)
	c := r.Counts
	if r.Operation == "apply" {
		fmt.Fprintf(&b, ": %d created, %d configured, %d unchanged", c.Created, c.Configured, c.Unchanged)
		if c.Recreated > 0 {
			fmt.Fprintf(&b, ", %d recreated", c.Recreated)
		}
		fmt.Fprintf(&b, ", %d pruned, %d skipped", c.Deleted, c.Skipped)
	} else {
		fmt.Fprintf(&b, ": %d stale, %d pruned, %d skipped", c.Stale, c.Deleted, c.Skipped)
	}
	if c.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", c.Failed)
	}
	if c.Ghosts > 0 {
		fmt.Fprintf(&b, ", %d ghost(s) found", c.Ghosts)
	}
	if c.NotOurs > 0 {
		fmt.Fprintf(&b, ", %d recorded but not ours (kept)", c.NotOurs)
	}
	fmt.Fprintf(&b, "; digest=%s change=%s inventory=%s", r.ManifestDigest, r.ChangeID, r.Inventory.Name)
	if r.Error != "" && !r.Inventory.Written && !r.DryRun {
		b.WriteString(" (not written)")
	}
	fmt.Fprintf(&b, " in %s", (time.Duration(r.DurationSeconds * float64(time.Second))).Round(time.Millisecond))
	return b.String()
}

// Summary is the one-line account of a deleted release.
func DeletedLine(d pipeline.DeletedRelease) string {
	if d.NothingToDelete {
		return fmt.Sprintf("release %s: nothing to delete (already deleted?)", d.Label())
	}
	verb := "deleted"
	if d.DryRun {
		verb = "would delete (dry run)"
	}
	inv := "no inventory Secret"
	switch {
	case d.Inventory.Deleted:
		inv = "inventory " + d.Inventory.Name + " deleted"
	case d.Inventory.Written:
		inv = "inventory " + d.Inventory.Name + " kept with the skipped objects"
	case d.Inventory.Name != "" && d.DryRun:
		inv = "inventory " + d.Inventory.Name + " would be deleted"
	}
	n := len(d.Deleted)
	return fmt.Sprintf("release %s (namespace %s) on %s: %s %d object(s), skipped %d; %s; found by %s",
		d.Label(), d.Namespace, d.Cluster, verb, n, len(d.Skipped), inv, d.Discovery)
}

// Summary is the one-line account of a repaired release.
func RepairedLine(r pipeline.RepairedRelease) string {
	verb := "rebuilt"
	if r.DryRun {
		verb = "would rebuild (dry run)"
	}
	s := fmt.Sprintf("release %s (namespace %s): %s inventory %s from %d rendered and %d labelled object(s); %d no longer rendered (the next apply prunes them)",
		r.Name, r.Namespace, verb, r.Inventory.Name, r.Rendered, r.Discovered, len(r.Stale))
	if r.Backup != "" {
		s += "; the old Secret's data is in " + r.Backup
	}
	if r.WasCorrupt == "" {
		s += "; the old inventory was readable"
	}
	return s
}

// Summary is one line per release.
func ApplySummary(r *pipeline.ApplyResult) string {
	lines := make([]string, 0, len(r.Releases))
	for _, rel := range r.Releases {
		lines = append(lines, AppliedLine(rel))
	}
	return strings.Join(lines, "\n")
}

// Summary is one line per release.
func DeleteSummary(r *pipeline.DeleteResult) string {
	lines := make([]string, 0, len(r.Releases))
	for _, rel := range r.Releases {
		lines = append(lines, DeletedLine(rel))
	}
	return strings.Join(lines, "\n")
}
