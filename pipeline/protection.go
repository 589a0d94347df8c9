package pipeline

import (
	"fmt"

	"github.com/opmodel/pipeline/engine/inventory"
)

// Protection lifts apply's protection of stale Namespaces (deleting one
// deletes everything in it) and PersistentVolumeClaims (deleting one
// deletes its data). Apply, Prune and Delete obey it; Diff and Review warn
// exactly as apply would act.
type Protection struct {
	PruneNamespaces bool `json:"pruneNamespaces,omitempty"`
	PrunePVCs       bool `json:"prunePVCs,omitempty"`
}

// warnings returns the per-object and per-release warnings the protection
// gives for a stale entry, or "" when apply would simply prune it.
func (p Protection) warnings(e inventory.Entry) (object, release string) {
	if e.Group != "" {
		return "", ""
	}
	id := e.ID.String()
	switch e.Kind {
	case "Namespace":
		if p.PruneNamespaces {
			return "pruning deletes the Namespace and everything in it",
				fmt.Sprintf("%s would be pruned, with everything in it (--prune-namespaces)", id)
		}
		return "kept: apply prunes a Namespace only with --prune-namespaces",
			fmt.Sprintf("%s is no longer rendered; apply keeps it (pass --prune-namespaces to delete it and everything in it)", id)
	case "PersistentVolumeClaim":
		if p.PrunePVCs {
			return "pruning deletes the claim and, with a Delete reclaim policy, its data",
				fmt.Sprintf("%s would be pruned, and its volume's data with it under a Delete reclaim policy (--prune-pvcs)", id)
		}
		return "kept: apply prunes a PersistentVolumeClaim only with --prune-pvcs",
			fmt.Sprintf("%s is no longer rendered; apply keeps it and its data (pass --prune-pvcs to delete it)", id)
	}
	return "", ""
}
