package pipeline

import (
	"cmp"
	"context"
	"strings"

	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
)

// FleetEnvironment is one environment of a fleet selection: its group,
// wave and gates (the environments rollout.after expands to).
type FleetEnvironment = fleet.Environment

// Fleet resolves what a selection's Environment names: an environment, a
// group (when no environment has that name), or a comma list of both; or,
// with Group set, that group. Sorted by wave, then name. A selection of
// one plain environment, or none, is returned as it is, with no fleet
// read, so single-environment commands cost what they did.
func Fleet(ctx context.Context, sel Selection) ([]FleetEnvironment, error) {
	if sel.Group == "" && !strings.Contains(sel.Environment, ",") {
		if sel.Environment == "" {
			return []FleetEnvironment{{}}, nil
		}
	}
	d, err := load.Load(ctx, cmp.Or(sel.Dir, "."))
	if err != nil {
		return nil, err
	}
	f, err := fleet.Read(d)
	if err != nil {
		return nil, err
	}
	if sel.Group != "" {
		return f.Select(sel.Group, true)
	}
	return f.Select(sel.Environment, false)
}

// Waves groups a fleet selection by wave, in ascending order.
func Waves(envs []FleetEnvironment) [][]FleetEnvironment { return fleet.Waves(envs) }

// ForEnvironment returns the selection narrowed to one environment.
func (s Selection) ForEnvironment(env string) Selection {
	s.Environment, s.Group = env, ""
	return s
}

// IsFleet reports whether the selection may name more than one
// environment (a group, a comma list).
func (s Selection) IsFleet() bool { return s.Group != "" || strings.Contains(s.Environment, ",") }
