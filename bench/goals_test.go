//go:build bench

package bench

import "fmt"

// goals are the limits docs/performance.md sets, by the name a case is
// printed under: a ratio to the peer on the same line, or (render-1000)
// seconds. The bench is not a timed test, so a missed goal fails nothing:
// its line ends in "missed", which `make bench | grep missed` finds.
var goals = map[string]float64{
	"reapply-200":      0.08, // vs kubectl
	"diff-200":         0.6,  // vs kubectl
	"status-200":       1.0,  // vs kubectl
	"apply-1000":       0.35, // vs kubectl
	"apply-1000-ssa":   0.35,
	"reapply-1000-ssa": 0.35,
	"diff-1000-ssa":    1.0,
	"review-mono":      2.0, // vs the same review of the one release alone
	"render-1000":      1.0, // seconds
	// a diff where a tenth of the objects (a fifth of the components)
	// changed, and one where a tenth of the components did (issue 62's
	// words), against the full render of them all (opm's own ratio)
	"diff-1000-tenth-changed":               0.4,
	"diff-1000-tenth-of-components-changed": 0.4,
	// opm's render CPU against CUE evaluating and exporting the same
	// objects from the same catalog and module
	"render-1000-cpu-vs-cue-export": 0.6,
}

// verdict is the goal part of a case's line: " goal≤0.60 met", " goal≤0.60
// missed", or "" for a case without a goal.
func verdict(name string, value float64) string {
	limit, ok := goals[name]
	if !ok {
		return ""
	}
	if value <= limit {
		return fmt.Sprintf(" goal≤%.2f met", limit)
	}
	return fmt.Sprintf(" goal≤%.2f missed", limit)
}
