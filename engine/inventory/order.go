package inventory

import (
	"slices"

	"github.com/opmodel/pipeline/engine/manifest"
)

// SortForDelete orders entries for deletion: reverse apply order, so
// custom resources go before their definitions and Namespaces go last.
func SortForDelete(es []Entry) {
	slices.SortStableFunc(es, func(a, b Entry) int { return manifest.CompareIDs(b.ID, a.ID) })
}
