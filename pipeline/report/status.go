package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/opmodel/pipeline/pipeline"
)

// Table renders a status result for a terminal: each release's identity,
// then its objects by component with health and reason, ghosts apart.
func StatusTable(r *pipeline.StatusResult) string {
	var b strings.Builder
	for i, rs := range r.Releases {
		if i > 0 {
			b.WriteString("\n")
		}
		env := rs.Environment
		if env == "" {
			env = "-"
		}
		fmt.Fprintf(&b, "Release:     %s (namespace %s, environment %s)\n", rs.Name, rs.Namespace, env)
		fmt.Fprintf(&b, "Release ID:  %s\n", rs.ReleaseID)
		if rs.ModuleID != "" {
			fmt.Fprintf(&b, "Module ID:   %s\n", rs.ModuleID)
		}
		if rs.ChangeID != "" {
			fmt.Fprintf(&b, "Change:      %s (last transition %s)\n", rs.ChangeID, rs.LastTransitionTime)
		}
		fmt.Fprintf(&b, "Discovery:   %s\n", rs.Discovery)
		health := "healthy"
		if !rs.Healthy {
			health = "not healthy"
		}
		fmt.Fprintf(&b, "Health:      %s\n\n", health)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COMPONENT\tKIND\tNAME\tHEALTH\tREASON")
		n := 0
		for _, c := range rs.Components {
			for _, o := range c.Objects {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(c.Name), o.Kind, o.Name, o.Health, o.Reason)
				n++
			}
		}
		if n == 0 {
			fmt.Fprintln(tw, "-\t-\t-\t-\tno objects found")
		}
		tw.Flush()
		if len(rs.Ghosts) > 0 {
			b.WriteString("\nGhosts (labelled for this release, in neither the inventory nor the render):\n")
			for _, g := range rs.Ghosts {
				fmt.Fprintf(&b, "  %s\n", g.String())
			}
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
