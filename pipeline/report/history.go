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
		fmt.Fprintln(tw, "CHANGE\tFIRST APPLIED\tLAST APPLIED\tDIGEST\tOBJECTS\tSOURCE (LAST)")
		for _, c := range rh.Changes {
			id := c.ChangeID
			if c.Current {
				id += " *"
			}
			src := sourceText(c.Source)
			if len(c.ForcedFrom) > 0 {
				src += " (forced from " + strings.Join(c.ForcedFrom, ", ") + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", id, firstText(c.First), c.Timestamp, ShortDigest(c.ManifestDigest), c.Objects, src)
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
		c := shortCommit(s.Commit)
		if s.Ref != "" {
			c = s.Ref + "@" + c
		}
		if s.Dirty {
			c += " (dirty)"
		}
		parts = append(parts, c)
	}
	if s.Actor != "" {
		parts = append(parts, "by "+s.Actor)
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

// firstText is when, from which commit and by whom a change first ran:
// "2026-11-26T10:00:00Z 1a2b3c4d5e6f by alice".
func firstText(f inventory.Sighting) string {
	parts := []string{cmp.Or(f.Time, "-")}
	if f.Commit != "" {
		parts = append(parts, shortCommit(f.Commit))
	}
	if f.Actor != "" {
		parts = append(parts, "by "+f.Actor)
	}
	return strings.Join(parts, " ")
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
