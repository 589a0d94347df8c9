package change

import "slices"

// Drift states of an environment, worst last.
const (
	InSync      = "in sync"
	Drifted     = "drifted"
	DriftError  = "error"
	Unreachable = "unreachable"
)

// EnvironmentDrift sums up one environment of a diff: does the cluster
// run what the repository says?
type EnvironmentDrift struct {
	Environment string `json:"environment"`
	// Status is InSync, Drifted, DriftError (a release could not be
	// compared) or Unreachable (its cluster could not be reached).
	Status   string `json:"status"`
	Releases int    `json:"releases"`
	Counts
}

// Drifted counts the objects that differ: to add, to change, stale and ghosts.
func (c Counts) Drifted() int { return c.Added + c.Modified + c.Stale + c.Ghost }

// Drift sums the change set up per environment, in order of appearance.
func (cs *Set) Drift() []EnvironmentDrift {
	var out []EnvironmentDrift
	for _, rc := range cs.Releases {
		i := slices.IndexFunc(out, func(e EnvironmentDrift) bool { return e.Environment == rc.Environment })
		if i < 0 {
			out = append(out, EnvironmentDrift{Environment: rc.Environment, Status: InSync})
			i = len(out) - 1
		}
		e := &out[i]
		e.Releases++
		e.Counts.AddAll(rc.Counts)
		status := InSync
		switch {
		case rc.Unreachable:
			status = Unreachable
		case rc.Error != "":
			status = DriftError
		case rc.Counts.Drifted() > 0:
			status = Drifted
		}
		if driftRank(status) > driftRank(e.Status) {
			e.Status = status
		}
	}
	return out
}

func driftRank(s string) int {
	return slices.Index([]string{InSync, Drifted, DriftError, Unreachable}, s)
}
