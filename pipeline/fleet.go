package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
)

// FleetEnvironment is one environment of a fleet selection: its group,
// wave and gates (the environments rollout.after expands to).
type FleetEnvironment = fleet.Environment

// Fleet resolves what a selection's Environment names: an environment, a
// group (when no environment has that name), or a comma list of both; or,
// with Group set, that group. Sorted by wave, then name. A selection of
// no environment is returned as it is, with no fleet read; a plain
// environment reads the fleet (it may name a group, and its gates are in
// it) from the evaluation the fingerprints cache, so it costs no second
// evaluation.
func Fleet(ctx context.Context, sel Selection) ([]FleetEnvironment, error) {
	if sel.Group == "" && !strings.Contains(sel.Environment, ",") {
		if sel.Environment == "" {
			return []FleetEnvironment{{}}, nil
		}
	}
	f, err := readFleet(ctx, cmp.Or(sel.Dir, "."))
	if err != nil {
		return nil, err
	}
	if sel.Group != "" {
		return f.Select(sel.Group, true)
	}
	return f.Select(sel.Environment, false)
}

// readFleet reads the fleet dir declares from the environments its
// fingerprints evaluate (and cache), so an apply that reads its fleet and
// then fingerprints its releases evaluates the environments once, and a
// re-run on the same inputs not at all. Where they cannot be read that
// way, the environments alone are loaded and read (every release
// blanked where the syntax allows it, so the cost does not grow with the
// releases a repository holds), and that load reports what is wrong.
func readFleet(ctx context.Context, dir string) (*fleet.Fleet, error) {
	if tree, err := worktreeTree(ctx, dir); err == nil {
		if f, err := tree.Fleet(ctx); !errors.Is(err, fingerprint.ErrUnsure) {
			return f, err
		}
	}
	d, err := load.LoadWith(ctx, dir, load.Options{Pruned: fingerprint.EnvironmentsRoot(ctx, dir, nil)})
	if err != nil {
		return nil, err
	}
	return fleet.Read(d)
}

// fleetOf says whether a selection names a fleet: a group, a comma list,
// or (when err, a render's failure, says the environment is not declared)
// a group named like no environment. Only then is the fleet read, so a
// plain environment costs what it did. A selection that names a group
// (--group) or a list that cannot be read is that error (a mistyped group
// with its "did you mean"), as apply reports it, never a render of no
// environment.
func fleetOf(ctx context.Context, sel Selection, err error) ([]FleetEnvironment, bool, error) {
	if !sel.IsFleet() && (err == nil || sel.Environment == "" || !errors.Is(err, render.ErrUndeclaredEnvironment)) {
		return nil, false, nil
	}
	envs, ferr := Fleet(ctx, sel)
	if ferr != nil && sel.IsFleet() && err == nil && fault.KindOf(ferr) == fault.Validation {
		return nil, false, ferr
	}
	if ferr != nil || (len(envs) == 1 && envs[0].Name == sel.Environment) {
		return nil, false, nil
	}
	return envs, true, nil
}

// routed runs an operation on one environment, or on each environment of
// a fleet: the one place a per-environment operation decides which. The
// fleet is read before one only when the selection says fleet (a group, a
// comma list); otherwise one runs, and only when it fails because --env
// names no environment (render.ErrUndeclaredEnvironment: it may name a
// group) is the fleet read and each run instead.
func routed[T any](ctx context.Context, sel Selection, one func() (T, error), each func([]FleetEnvironment) (T, error)) (T, error) {
	envs, ok, err := fleetOf(ctx, sel, nil)
	if err != nil {
		var zero T
		return zero, err
	}
	if ok {
		return each(envs)
	}
	res, err := one()
	if err != nil {
		if envs, ok, _ := fleetOf(ctx, sel, err); ok {
			return each(envs)
		}
	}
	return res, err
}

// eachEnvironment runs op on the selection narrowed to each environment
// of a fleet, in wave order, every one of them whatever the others did;
// the errors are joined, each naming its environment and wave.
func eachEnvironment(sel Selection, envs []FleetEnvironment, op func(Selection) error) error {
	var errs []error
	for _, e := range envs {
		if err := op(sel.ForEnvironment(e.Name)); err != nil {
			errs = append(errs, fmt.Errorf("environment %s (wave %d): %w", e.Name, e.Wave, err))
		}
	}
	return errors.Join(errs...)
}

// renderFleet renders each environment of a fleet, in wave order.
func renderFleet(ctx context.Context, opts RenderOptions, envs []FleetEnvironment) (*RenderResult, error) {
	out := &RenderResult{}
	for _, e := range envs {
		o := opts
		o.Selection = opts.Selection.ForEnvironment(e.Name)
		r, err := Render(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("environment %s (wave %d): %w", e.Name, e.Wave, err)
		}
		for i := range r.Releases {
			r.Releases[i].Wave = &e.Wave
		}
		out.Releases = append(out.Releases, r.Releases...)
	}
	return out, nil
}

// single refuses a fleet selection for an operation that works on one
// environment at a time: it would otherwise render without one.
func single(s Selection, op string) error {
	if s.IsFleet() {
		return fault.Validationf("%s works on one environment at a time, and %q selects a group or several: run it per environment (--env NAME); render, diff, status, apply, prune, delete and smoke take a fleet", op, cmp.Or(s.Group, s.Environment))
	}
	return nil
}

// MatrixEntry is one environment of a plan: a job of a CI matrix.
type MatrixEntry struct {
	Environment string `json:"environment"`
	Wave        int    `json:"wave"`
	Group       string `json:"group,omitempty"`
}

// Matrix is GitHub Actions' strategy.matrix form: {"include": [...]}.
type Matrix struct {
	Include []MatrixEntry `json:"include"`
}

// Plan is a fleet selection laid out for CI: every environment (one
// matrix job each), the waves in order, and one matrix per wave, for
// workflows that chain waves with `needs:`.
type Plan struct {
	Matrix       Matrix            `json:"matrix"`
	Waves        []int             `json:"waves"`
	WaveMatrices map[string]Matrix `json:"waveMatrices"`
}

// PlanFleet plans a selection; with no environment or group, every
// environment the deployment declares.
func PlanFleet(ctx context.Context, sel Selection) (*Plan, error) {
	if sel.Environment == "" && sel.Group == "" {
		all, err := DeclaredEnvironments(ctx, sel.Dir)
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, fault.Validationf("%s declares no environments to plan", cmp.Or(sel.Dir, "."))
		}
		sel.Environment = strings.Join(all, ",")
	}
	envs, err := Fleet(ctx, sel)
	if err != nil {
		return nil, err
	}
	p := &Plan{Matrix: Matrix{Include: []MatrixEntry{}}, Waves: []int{}, WaveMatrices: map[string]Matrix{}}
	for _, e := range envs {
		m := MatrixEntry{Environment: e.Name, Wave: e.Wave, Group: e.Group}
		p.Matrix.Include = append(p.Matrix.Include, m)
		k := fmt.Sprint(e.Wave)
		if _, ok := p.WaveMatrices[k]; !ok {
			p.Waves = append(p.Waves, e.Wave)
		}
		wm := p.WaveMatrices[k]
		wm.Include = append(wm.Include, m)
		p.WaveMatrices[k] = wm
	}
	return p, nil
}
