package pipeline

import (
	"fmt"

	"github.com/opmodel/pipeline/engine/inventory"
)

// protection returns the per-object and per-release warnings that apply's
// Namespace and PersistentVolumeClaim protection gives for a stale entry,
// or "" when apply would simply prune it. Diff and Review both use it, so
// they always say what apply will do.
func protection(e inventory.Entry, pruneNamespaces, prunePVCs bool) (object, release string) {
	if e.Group != "" {
		return "", ""
	}
	id := e.ID().String()
	switch e.Kind {
	case "Namespace":
		if pruneNamespaces {
			return "pruning deletes the Namespace and everything in it",
				fmt.Sprintf("%s would be pruned, with everything in it (--prune-namespaces)", id)
		}
		return "kept: apply prunes a Namespace only with --prune-namespaces",
			fmt.Sprintf("%s is no longer rendered; apply keeps it (pass --prune-namespaces to delete it and everything in it)", id)
	case "PersistentVolumeClaim":
		if prunePVCs {
			return "pruning deletes the claim and, with a Delete reclaim policy, its data",
				fmt.Sprintf("%s would be pruned, and its volume's data with it under a Delete reclaim policy (--prune-pvcs)", id)
		}
		return "kept: apply prunes a PersistentVolumeClaim only with --prune-pvcs",
			fmt.Sprintf("%s is no longer rendered; apply keeps it and its data (pass --prune-pvcs to delete it)", id)
	}
	return "", ""
}
