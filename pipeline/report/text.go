package report

import (
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
)

// ANSI colours for diff lines and health words on a terminal.
const (
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorCyan   = "\x1b[36m"
	colorReset  = "\x1b[0m"
)

// Text renders a change set for a terminal or a log: one line per object
// with its class, a unified diff per changed object, warnings, and a
// summary line per release with counts, digest and change ID. color adds
// ANSI colours (only for a terminal).
func Text(cs *pipeline.ChangeSet, color bool) string {
	var b strings.Builder
	for _, rc := range cs.Releases {
		env := rc.Environment
		if env == "" {
			env = "-"
		}
		fmt.Fprintf(&b, "release %s (env %s, namespace %s)\n", rc.Name, env, rc.Namespace)
		if rc.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", rc.Error)
			continue
		}
		if rc.Reach != nil {
			fmt.Fprintf(&b, "  writes to %s\n", rc.Reach)
		}
		for _, h := range rc.Highlights {
			fmt.Fprintf(&b, "  moves: %s\n", h)
		}
		for _, o := range rc.Objects {
			line := fmt.Sprintf("  %-9s %s", o.Action, o.Ref.String())
			if o.Warning != "" {
				line += "  (" + o.Warning + ")"
			}
			b.WriteString(line + "\n")
		}
		for _, o := range rc.Objects {
			if o.Diff == "" || o.Action == pipeline.Unchanged {
				continue
			}
			fmt.Fprintf(&b, "\n# %s %s\n", o.Action, o.Ref.String())
			b.WriteString(colorize(o.Diff, color))
		}
		for _, w := range rc.Warnings {
			fmt.Fprintf(&b, "warning: %s\n", w)
		}
		fmt.Fprintf(&b, "%s\n\n", summary(rc))
	}
	if n := len(cs.Unchanged); n > 0 {
		fmt.Fprintf(&b, "%d release/environment pair(s) unchanged: inputs identical on both sides, not rendered\n", n)
	}
	return b.String()
}

// summary is the one-line account of a release's changes.
func summary(rc pipeline.ReleaseChanges) string {
	c := rc.Counts
	base := "none"
	if rc.Base != nil {
		base = rc.Base.ChangeID
	}
	return fmt.Sprintf("%s: %d added, %d modified, %d unchanged, %d stale, %d ghost; digest %s; change %s -> %s",
		rc.Name, c.Added, c.Modified, c.Unchanged, c.Stale, c.Ghost, rc.Head.ManifestDigest, base, rc.Head.ChangeID)
}

func colorize(diff string, color bool) string {
	if !color {
		return diff
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"), strings.HasPrefix(line, "@@"):
			b.WriteString(colorCyan + strings.TrimSuffix(line, "\n") + colorReset + "\n")
		case strings.HasPrefix(line, "+"):
			b.WriteString(colorGreen + strings.TrimSuffix(line, "\n") + colorReset + "\n")
		case strings.HasPrefix(line, "-"):
			b.WriteString(colorRed + strings.TrimSuffix(line, "\n") + colorReset + "\n")
		default:
			b.WriteString(line)
		}
	}
	return b.String()
}
