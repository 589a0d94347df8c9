package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// NextSteps are the exact commands that take a failed environment on;
// dir is the deployment directory as the user named it. Published (text
// CI prints as it is), a sensitive release's change ID stays out: the
// rollback is named through opm history instead.
func NextSteps[R AppliedRelease, S any](dir string, e EnvironmentResult[R, S], published bool) []string {
	dir = ShellQuote(cmp.Or(dir, "."))
	apply := fmt.Sprintf("opm apply %s --env %s", dir, e.Name)
	switch e.Result {
	case Gated:
		return nil // the refusal names its own next step
	case Failed:
		return []string{"fix what the error names, commit, and rerun: " + apply}
	}
	// Unhealthy or failed its smoke test: roll back what this run changed
	// (to the change it ran before), or fix forward. A release the run
	// left as it was is not where the failure came from.
	var next []string
	for _, ar := range e.Releases {
		r := ar.RolloutRelease()
		switch {
		case e.Unhealthy != nil && !slices.Contains(e.Unhealthy, r.Name):
			// Healthy: not where the failure is, whatever this run changed.
		case r.Previous == "" || r.Previous == r.ChangeID || !r.Written:
		case r.Sensitive && published:
			// A sensitive release's change IDs stay out of text that CI
			// publishes (the error of a deploy job); history shows it.
			next = append(next, fmt.Sprintf("opm history %s %s --env %s   # then opm rollback %s to the change before this one", r.Name, dir, e.Name, r.Name))
		default:
			next = append(next, fmt.Sprintf("opm rollback %s %s --env %s --to %s   # back to what ran before", r.Name, dir, e.Name, r.Previous))
		}
	}
	if len(next) == 0 {
		return []string{"fix forward: commit a fix and rerun: " + apply}
	}
	return append(next, "or fix forward: commit a fix and rerun: "+apply)
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
