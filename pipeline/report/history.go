package report

import (
	"cmp"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/pipeline"
)

// Table renders the history for a terminal: per release, one line per
// change, newest first, the current one marked.
func HistoryTable(r *pipeline.HistoryResult) string {
	var b strings.Builder
	for i, rh := range r.Releases {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Release:    %s (namespace %s, environment %s)\nInventory:  %s on %s\n\n", rh.Name, rh.Namespace, cmp.Or(rh.Environment, "-"), rh.Inventory, rh.Cluster)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHANGE\tTIME\tDIGEST\tOBJECTS\tSOURCE")
		for _, c := range rh.Changes {
			id := c.ChangeID
			if c.Current {
				id += " *"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", id, c.Timestamp, ShortDigest(c.ManifestDigest), c.Objects, sourceText(c.Source))
		}
		_ = tw.Flush()
	}
	return b.String()
}

// sourceText is "ref@commit (dirty) run-url", "-" when nothing is known.
func sourceText(s *inventory.Source) string {
	if s == nil {
		return "-"
	}
	var parts []string
	if s.Commit != "" {
		c := s.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if s.Ref != "" {
			c = s.Ref + "@" + c
		}
		if s.Dirty {
			c += " (dirty)"
		}
		parts = append(parts, c)
	}
	if s.RunURL != "" {
		parts = append(parts, s.RunURL)
	}
	if s.GatesSkippedBy != "" {
		parts = append(parts, "(gates skipped: "+s.GatesSkippedBy+")")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
