package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline/change"
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

// A diff summed up per environment (pipeline/change), under the names the
// front doors use.
type EnvironmentDrift = change.EnvironmentDrift

// Drift states of an environment, worst last.
const (
	InSync      = change.InSync
	Drifted     = change.Drifted
	DriftError  = change.DriftError
	Unreachable = change.Unreachable
)
