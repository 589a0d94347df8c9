package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// diffEach is Diff in each of opts.Environments, or every declared
// environment (none declared: the releases as written), in order.
func diffEach(ctx context.Context, opts DiffOptions) (*ChangeSet, error) {
	envs := opts.Environments
	if opts.AllEnvironments {
		var err error
		if envs, err = DeclaredEnvironments(ctx, opts.RenderOptions(ctx).Dir); err != nil {
			return nil, err
		}
		switch len(envs) {
		case 0:
			envs = []string{""}
		case 1:
		default:
			// In wave order, as a rollout meets them (the fleet sorts by
			// wave, then name).
			f, err := Fleet(ctx, Selection{Dir: opts.Dir, Environment: strings.Join(envs, ",")})
			if err != nil {
				return nil, err
			}
			envs = envs[:0]
			for _, e := range f {
				envs = append(envs, e.Name)
			}
		}
	}
	out := &ChangeSet{Operation: "diff", Releases: []ReleaseChanges{}}
	var errs []error
	for _, env := range envs {
		o := opts
		o.AllEnvironments, o.Environments, o.Environment = false, nil, env
		cs, err := Diff(ctx, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("environment %s: %w", cmp.Or(env, "-"), err))
		}
		if cs == nil {
			name := strings.Join(opts.Releases, ",")
			out.Releases = append(out.Releases, ReleaseChanges{Name: cmp.Or(name, "(all releases)"), Environment: env, Error: err.Error()})
			continue
		}
		out.Releases = append(out.Releases, cs.Releases...)
		out.Counts.AddAll(cs.Counts)
	}
	return out, errors.Join(errs...)
}

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
func (cs *ChangeSet) Drift() []EnvironmentDrift {
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
