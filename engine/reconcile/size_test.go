package reconcile

import (
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/inventory"
)

// A 1 000-object release applied 15 times with the default history: the
// inventory would pass its size limit after a few changes, so the oldest
// are trimmed before anything is applied, and every apply succeeds.
func TestBigReleaseTrimsHistoryInsteadOfFailing(t *testing.T) {
	ns := env.Namespace(t)
	docs := func(round int) []string {
		out := make([]string, 0, 1000)
		for i := range 1000 {
			value := "value"
			if i == 0 {
				value = fmt.Sprint("round-", round)
			}
			out = append(out, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a-config-map-with-a-rather-long-name-%06d, namespace: NS}\ndata: {key: %q}\n", i, value))
		}
		return out
	}
	trimmed := 0
	for round := range 15 {
		rel := direct(t, "big", ns, docs(round)...)
		res, err := Apply(t.Context(), cluster(t), rel, Options{})
		assert.NilError(t, err, "apply %d", round+1)
		assert.Assert(t, res.Inventory.Written)
		assert.Equal(t, res.Inventory.ChangeIDs[0], rel.ChangeID)
		for _, w := range res.Warnings {
			if strings.Contains(w, "oldest change(s) to stay under") {
				trimmed++
			}
		}
		s := secret(t, rel)
		assert.Check(t, is.Len(s.latest(), 1000))
		assert.Check(t, len(s.Index) <= inventory.DefaultMaxHistory)
		assert.DeepEqual(t, s.Index, res.Inventory.ChangeIDs)
	}
	assert.Assert(t, trimmed > 0, "the history was never trimmed")
	t.Logf("history trimmed on %d of 15 applies", trimmed)
}
