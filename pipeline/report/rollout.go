package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/opmodel/pipeline/pipeline"
)

// RolloutTable is a fleet rollout as a table, in wave order: environment,
// wave, group, cluster context, result and change IDs; then each
// environment's error.
func RolloutTable(res *pipeline.RolloutResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVIRONMENT\tWAVE\tGROUP\tCONTEXT\tRESULT\tCHANGE")
	for _, e := range res.Environments {
		var changes []string
		for _, r := range slices.Sorted(maps.Keys(e.ChangeIDs)) {
			changes = append(changes, r+"="+e.ChangeIDs[r])
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", e.Name, e.Wave, orDash(e.Group), orDash(e.KubeContext), e.Result, orDash(strings.Join(changes, " ")))
	}
	tw.Flush()
	for _, e := range res.Environments {
		if e.Error != "" {
			fmt.Fprintf(&b, "\n%s (%s): %s\n", e.Name, e.Result, e.Error)
		}
		for _, n := range e.Next {
			fmt.Fprintf(&b, "next: %s\n", n)
		}
	}
	return b.String()
}
