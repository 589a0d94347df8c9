package report

import (
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/opmodel/pipeline/pipeline"
)

// Table renders a status result for a terminal: each release's identity,
// then its objects by component with health and reason, ghosts apart.
//
// A fleet (several environments) starts with its board (FleetBoard).
func StatusTable(r *pipeline.StatusResult) string {
	var b strings.Builder
	if environments(r) > 1 {
		b.WriteString(FleetBoard(r) + "\n")
	}
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
		if rs.Since != "" {
			health += " since " + rs.Since
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
		for _, w := range rs.Warnings {
			fmt.Fprintf(&b, "\nWarning: %s\n", w)
		}
		if len(rs.EditedSince) > 0 {
			fmt.Fprintf(&b, "\nDrift: what runs may not be change %s:\n", orDash(rs.ChangeID))
			for _, e := range rs.EditedSince {
				fmt.Fprintf(&b, "  %s\n", e)
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

// FleetBoard is the script-free answer to "which commit runs where, and
// healthy since when": one row per environment and release, in the order
// status lists them (wave order for a fleet), with the commit, change,
// health and since when (its last change, or a later transition of one
// of its objects), and who skipped its gates.
func FleetBoard(r *pipeline.StatusResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVIRONMENT\tRELEASE\tCOMMIT\tCHANGE\tHEALTH\tSINCE\tGATES SKIPPED")
	for _, row := range boardRows(r) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	return b.String()
}

// FleetBoardMarkdown is FleetBoard as a Markdown table, for a job summary.
func FleetBoardMarkdown(r *pipeline.StatusResult) string {
	var b strings.Builder
	b.WriteString("| Environment | Release | Commit | Change | Health | Since | Gates skipped |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range boardRows(r) {
		for i := range row {
			row[i] = strings.ReplaceAll(row[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

func boardRows(r *pipeline.StatusResult) [][]string {
	var out [][]string
	for _, rs := range r.Releases {
		commit, skipped := "-", "-"
		if s := rs.Source; s != nil {
			if s.Commit != "" {
				commit = s.Commit
				if len(commit) > 12 {
					commit = commit[:12]
				}
				if s.Dirty {
					commit += " (dirty)"
				}
			}
			skipped = orDash(s.GatesSkippedBy)
		}
		health := "healthy"
		if !rs.Healthy {
			health = "not healthy"
		}
		if len(rs.EditedSince) > 0 {
			// Healthy, but perhaps not at its change: someone wrote it since.
			health += ", edited since"
		}
		out = append(out, []string{orDash(rs.Environment), rs.Name, commit, orDash(rs.ChangeID), health, orDash(rs.Since), skipped})
	}
	return out
}

// environments counts the environments a status result covers.
func environments(r *pipeline.StatusResult) int {
	seen := map[string]bool{}
	for _, rs := range r.Releases {
		seen[rs.Environment] = true
	}
	return len(seen)
}

// healthWords are the health states and verdicts StatusTable prints.
var healthWords = regexp.MustCompile(`\b(Current|InProgress|Terminating|Unknown|Failed|NotFound|not healthy|healthy)\b`)

// PaintHealth colours the health words of a finished status table (green,
// yellow, red), when on: escape codes added after the columns were
// aligned leave the alignment as it was.
func PaintHealth(text string, on bool) string {
	if !on {
		return text
	}
	return healthWords.ReplaceAllStringFunc(text, func(w string) string {
		c := colorYellow
		switch w {
		case "Current", "healthy":
			c = colorGreen
		case "Failed", "NotFound", "not healthy":
			c = colorRed
		}
		return c + w + colorReset
	})
}
