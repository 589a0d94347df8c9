package report

import (
	"cmp"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/opmodel/pipeline/pipeline"
)

// Text renders a smoke test for a terminal or a log: per release its
// throwaway namespace, each step with its time and outcome, and after a
// failure the unhealthy objects, the changes a second apply would make,
// the leftovers, recent Events and what cleanup did.
func SmokeText(r *pipeline.SmokeResult) string {
	var b strings.Builder
	for _, rel := range r.Releases {
		verdict := "PASSED"
		if !rel.Passed {
			verdict = "FAILED at " + rel.FailedStep
		}
		fmt.Fprintf(&b, "smoke %s (env %s) in namespace %s (instead of %s) on %s: %s\n",
			rel.Name, mdEnvLabel(rel.Environment), rel.Namespace, rel.OriginalNamespace, r.Cluster, verdict)
		for _, s := range rel.Steps {
			fmt.Fprintf(&b, "  %-7s %-10s %7s  %s\n", s.State, s.Name, stepDuration(s), s.Detail)
		}
		for _, o := range rel.Unhealthy {
			fmt.Fprintf(&b, "  unhealthy %s: %s", o.String(), o.Health)
			if o.Reason != "" {
				fmt.Fprintf(&b, " (%s)", o.Reason)
			}
			b.WriteString("\n")
			for _, c := range o.Conditions {
				fmt.Fprintf(&b, "    condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		for _, c := range rel.Changes {
			fmt.Fprintf(&b, "  would change: %s %s\n", c.Action, c.Ref.String())
			if c.Diff != "" {
				for _, line := range strings.Split(strings.TrimRight(c.Diff, "\n"), "\n") {
					b.WriteString("    " + line + "\n")
				}
			}
		}
		for _, l := range rel.Leftovers {
			fmt.Fprintf(&b, "  left behind: %s\n", l.String())
		}
		for _, e := range rel.Events {
			fmt.Fprintf(&b, "  event %s %s %s: %s\n", e.Type, e.Reason, e.Object, e.Message)
		}
		for _, w := range rel.Warnings {
			fmt.Fprintf(&b, "  note: %s\n", w)
		}
		fmt.Fprintf(&b, "  cleanup: %s\n\n", rel.Cleanup)
	}
	passed := len(r.Releases) - len(r.Failed())
	fmt.Fprintf(&b, "smoke: %d of %d releases passed on %s in %s\n", passed, len(r.Releases), r.Cluster, secs(r.DurationSeconds))
	return b.String()
}

// Markdown renders a smoke test for a pull-request comment or a job
// summary, with the same options as Markdown (Title, Marker,
// Environments, Limit).
func SmokeMarkdown(r *pipeline.SmokeResult, opts MarkdownOptions) string {
	var b strings.Builder
	if opts.Marker != "" {
		b.WriteString(opts.Marker + "\n")
	}
	b.WriteString("## " + cmp.Or(opts.Title, "opm smoke"))
	envs := opts.Environments
	if len(envs) == 0 && r.Environment != "" {
		envs = []string{r.Environment}
	}
	if len(envs) > 0 {
		b.WriteString(": " + strings.Join(envs, ", "))
	}
	b.WriteString("\n\n")
	failed := len(r.Failed())
	switch {
	case len(r.Releases) == 0:
		b.WriteString("**No release is selected.**\n\n")
	case failed == 0:
		fmt.Fprintf(&b, "✅ **Passed.** %s deployed to throwaway namespaces, healthy, idempotent and deleted without leftovers (%s).\n\n", mdPlural(len(r.Releases), "release", "releases"), secs(r.DurationSeconds))
	default:
		fmt.Fprintf(&b, "❌ **Failed.** %d of %s failed (%s).\n\n", failed, mdPlural(len(r.Releases), "release", "releases"), secs(r.DurationSeconds))
	}
	if len(r.Releases) > 0 {
		b.WriteString("| Release | Environment | Namespace | Result |")
		for _, s := range pipeline.SmokeSteps() {
			b.WriteString(" " + s + " |")
		}
		b.WriteString("\n| --- | --- | --- | --- |" + strings.Repeat(" ---: |", len(pipeline.SmokeSteps())) + "\n")
		for _, rel := range r.Releases {
			result := "✅ passed"
			if !rel.Passed {
				result = "❌ " + rel.FailedStep
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |", mdCell(rel.Name), mdCell(mdEnvLabel(rel.Environment)), mdCode(rel.Namespace), result)
			for _, s := range rel.Steps {
				fmt.Fprintf(&b, " %s %s |", stepMark(s.State), stepDuration(s))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	for _, rel := range r.Releases {
		b.WriteString(markdownDetails(rel))
	}
	b.WriteString("_A smoke test proves the release installs, becomes healthy, converges and deletes cleanly on a throwaway cluster; it sends no real traffic and that cluster is not production._\n")
	out := b.String()
	limit := opts.Limit
	if limit == 0 {
		limit = DefaultMarkdownLimit
	}
	if limit > 0 && len(out) > limit {
		return mdHardCut(out, limit)
	}
	return out
}

func markdownDetails(rel pipeline.SmokeRelease) string {
	var b strings.Builder
	summary := fmt.Sprintf("<b>%s</b> · %s · ", html.EscapeString(rel.Name), html.EscapeString(mdEnvLabel(rel.Environment)))
	if rel.Passed {
		summary += "passed"
	} else {
		summary += "failed at " + rel.FailedStep
	}
	fmt.Fprintf(&b, "<details>\n<summary>%s</summary>\n\n", summary)
	fmt.Fprintf(&b, "Deployed to the throwaway namespace %s instead of %s (the release id follows the namespace): release id %s, change %s.\n\n", mdCode(rel.Namespace), mdCode(rel.OriginalNamespace), mdCode(rel.ReleaseID), mdCode(rel.ChangeID))
	b.WriteString("| Step | Result | Time | Detail |\n| --- | --- | ---: | --- |\n")
	for _, s := range rel.Steps {
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s |\n", s.Name, stepMark(s.State), s.State, stepDuration(s), mdCell(mdEscape(s.Detail)))
	}
	b.WriteString("\n")
	if len(rel.Unhealthy) > 0 {
		b.WriteString("**Not healthy:**\n\n| Object | Health | Reason | Conditions |\n| --- | --- | --- | --- |\n")
		for _, o := range rel.Unhealthy {
			var conds []string
			for _, c := range o.Conditions {
				conds = append(conds, strings.TrimSpace(fmt.Sprintf("%s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCode(mdObjectName(o.ObjectRef)), o.Health, mdCell(mdEscape(o.Reason)), mdCell(mdEscape(strings.Join(conds, "; "))))
		}
		b.WriteString("\n")
	}
	if len(rel.Changes) > 0 {
		b.WriteString("**A second apply would change:**\n\n")
		for _, c := range rel.Changes {
			fmt.Fprintf(&b, "- %s %s\n", c.Action, mdCode(mdObjectName(c.Ref)))
			if c.Diff != "" {
				b.WriteString("\n" + mdFenced("diff", c.Diff) + "\n")
			}
		}
		b.WriteString("\n")
	}
	if len(rel.Leftovers) > 0 {
		b.WriteString("**Left behind after delete:**\n\n")
		for _, l := range rel.Leftovers {
			fmt.Fprintf(&b, "- %s\n", mdCode(mdObjectName(l)))
		}
		b.WriteString("\n")
	}
	if len(rel.Events) > 0 {
		b.WriteString("**Recent events:**\n\n| Type | Reason | Object | Message | Count |\n| --- | --- | --- | --- | ---: |\n")
		for _, e := range rel.Events {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %d |\n", mdCell(e.Type), mdCell(e.Reason), mdCode(e.Object), mdCell(mdEscape(e.Message)), e.Count)
		}
		b.WriteString("\n")
	}
	for _, w := range rel.Warnings {
		fmt.Fprintf(&b, "- ⚠️ %s\n", mdEscape(w))
	}
	fmt.Fprintf(&b, "- Cleanup: %s\n\n</details>\n\n", mdEscape(rel.Cleanup))
	return b.String()
}

func stepMark(state string) string {
	switch state {
	case pipeline.StepPassed:
		return "✅"
	case pipeline.StepFailed:
		return "❌"
	case pipeline.StepRunning:
		return "…"
	}
	return "—"
}

func stepDuration(s pipeline.SmokeStep) string {
	if s.State == pipeline.StepSkipped {
		return ""
	}
	return secs(s.DurationSeconds)
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(10 * time.Millisecond).String()
}

// Line is the progress line a front door prints.
func SmokeProgressLine(p pipeline.SmokeProgress) string {
	if p.Step.State == pipeline.StepRunning {
		return fmt.Sprintf("smoke %s: %s…", p.Release, p.Step.Name)
	}
	return fmt.Sprintf("smoke %s: %s %s in %s %s", p.Release, p.Step.Name, p.Step.State, secs(p.Step.DurationSeconds), p.Step.Detail)
}
