package operation

import (
	"fmt"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Protection lifts apply's protection of stale Namespaces (deleting one
// deletes everything in it), PersistentVolumeClaims (deleting one deletes
// its data) and CustomResourceDefinitions (deleting one deletes every
// custom resource of its kind, other teams' too). Apply, Prune and Delete
// obey it; Diff and Review warn exactly as apply would act. An object
// annotated helm.sh/resource-policy=keep (or opmodel.dev/resource-policy)
// is kept whatever the protection says.
type Protection struct {
	PruneNamespaces bool `json:"pruneNamespaces,omitempty"`
	PrunePVCs       bool `json:"prunePVCs,omitempty"`
	PruneCRDs       bool `json:"pruneCRDs,omitempty"`
}

func (p Protection) Unguarded() manifest.Unguarded {
	return manifest.Unguarded{Namespaces: p.PruneNamespaces, PVCs: p.PrunePVCs, CRDs: p.PruneCRDs}
}

// Warnings returns the per-object and per-release warnings the protection
// gives for a stale entry, or "" when apply would simply prune it. keptBy
// is the live object's keep annotation, when the caller read it.
func (p Protection) Warnings(e inventory.Entry, keptBy string) (object, release string) {
	id := e.ID.String()
	if keptBy != "" {
		return fmt.Sprintf("kept: its %s annotation is %q", keptBy, manifest.ResourcePolicyKeep),
			fmt.Sprintf("%s is no longer rendered; apply keeps it because of its %s annotation", id, keptBy)
	}
	g, ok := manifest.GuardOf(e.ID.GroupKind())
	if !ok {
		return "", ""
	}
	if p.Unguarded().Allows(g) {
		return fmt.Sprintf("pruning deletes the %s and %s", g.Kind, g.Loses),
			fmt.Sprintf("%s would be pruned, and %s with it (%s)", id, g.Loses, g.Flag)
	}
	return fmt.Sprintf("kept: apply prunes a %s only with %s", g.Kind, g.Flag),
		fmt.Sprintf("%s is no longer rendered; apply keeps it and %s (pass %s to delete it)", id, g.Loses, g.Flag)
}
