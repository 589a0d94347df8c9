// Package fleet reads a deployment directory's environments as a fleet:
// groups of environments (six production clusters, two staging ones)
// rolled out in waves, with promotion gates between them. It resolves what
// `--env` or `--group` selects, orders it (wave, then name) and checks the
// rollout graph: an unknown name in rollout.after or a cycle is an error
// at the environment's position, before anything runs.
//
// It only reads CUE; applying waves and checking gates against clusters is
// pipeline's job.
package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/suggest"
)

// Environment is one environment of the fleet.
type Environment struct {
	Name  string `json:"environment"`
	Group string `json:"group,omitempty"`
	Wave  int    `json:"wave"`
	// After names the environments and groups that gate this one, as
	// written; Gates is them expanded to environments.
	After []string `json:"after,omitempty"`
	Gates []string `json:"gates,omitempty"`
	// Soak is how long the environment must stay healthy before those it
	// gates may follow (rollout.soak); GateSoaks is the soak of each gate.
	Soak      time.Duration            `json:"soak,omitempty"`
	GateSoaks map[string]time.Duration `json:"-"`
	// KubeContext is the environment's cluster.kubeContext, if any.
	KubeContext string `json:"kubeContext,omitempty"`
	// Pos is where the environment is declared (file:line:col).
	Pos string `json:"-"`
	// wavePos is where rollout.wave is set, "" when the gate graph
	// decides the wave.
	wavePos string
}

// Fleet is every environment a deployment directory declares.
type Fleet struct {
	Environments []Environment // sorted by wave, then name
	byName       map[string]int
	groups       map[string][]string
}

// Declaration is an environment as its CUE declares it, before the
// fleet's checks: what New reads, and what a cache of evaluated
// environments keeps (engine/fingerprint), so a fleet is read without
// loading the deployment again.
type Declaration struct {
	Name  string   `json:"name"`
	Pos   string   `json:"pos"`
	Group string   `json:"group,omitempty"`
	After []string `json:"after,omitempty"`
	// Wave is rollout.wave; WavePos where it is set ("" when it is not:
	// the gate graph decides the wave).
	Wave        int           `json:"wave,omitempty"`
	WavePos     string        `json:"wavePos,omitempty"`
	Soak        time.Duration `json:"soak,omitempty"`
	KubeContext string        `json:"kubeContext,omitempty"`
}

// Read reads and checks the fleet of a loaded deployment directory.
func Read(d *load.Deployment) (*Fleet, error) {
	decl, err := Declare(d.Dir, d.Root.LookupPath(cue.ParsePath("environments")))
	if err != nil {
		return nil, err
	}
	return New(decl)
}

// Declare reads each environment of envs, the `environments` of the
// deployment directory dir, as declared; a field of the wrong type is an
// error at its position.
func Declare(dir string, envs cue.Value) ([]Declaration, error) {
	names, err := load.FieldNames(envs)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the environments of %s:\n%s", dir, load.Describe(err)))
	}
	out := make([]Declaration, 0, len(names))
	for _, n := range names {
		v := envs.LookupPath(cue.MakePath(cue.Str(n)))
		e := Declaration{Name: n, Pos: v.Pos().String()}
		e.Group, _ = v.LookupPath(cue.ParsePath("group")).String()
		w := v.LookupPath(cue.ParsePath("rollout.wave"))
		if dv, ok := w.Default(); ok {
			w = dv
		}
		if w.Exists() && w.IsConcrete() {
			i, err := w.Int64()
			if err != nil {
				return nil, fault.Validationf("environment %q: rollout.wave must be a whole number ≥ 0 (at %s): %s", n, w.Pos(), load.Describe(err))
			}
			e.Wave, e.WavePos = int(i), w.Pos().String()
		}
		if a := v.LookupPath(cue.ParsePath("rollout.after")); a.Exists() {
			if err := a.Decode(&e.After); err != nil {
				return nil, fault.Validationf("environment %q: rollout.after must list environment or group names (at %s)", n, a.Pos())
			}
		}
		if sv := v.LookupPath(cue.ParsePath("rollout.soak")); sv.Exists() {
			if err := sv.Validate(cue.Concrete(true)); err != nil {
				// The catalog's pattern refused it: CUE's error names the
				// value and both places (the user's file and the catalog).
				return nil, fault.Validationf("environment %q: rollout.soak must be a Go duration such as \"10m\" or \"1h30m\":\n%s", n, load.Describe(err))
			}
			text, _ := sv.String()
			d, err := time.ParseDuration(text)
			if err != nil || d < 0 {
				return nil, fault.Validationf("environment %q: rollout.soak %q is not a duration such as \"10m\" or \"1h30m\" (at %s)", n, text, sv.Pos())
			}
			e.Soak = d
		}
		e.KubeContext, _ = v.LookupPath(cue.ParsePath("cluster.kubeContext")).String()
		out = append(out, e)
	}
	return out, nil
}

// New checks declared environments as a fleet: every rollout.after
// names an environment or a group, no gate waits on itself, waves follow
// the gates.
func New(decl []Declaration) (*Fleet, error) {
	f := &Fleet{byName: map[string]int{}, groups: map[string][]string{}}
	for _, d := range decl {
		e := Environment{Name: d.Name, Pos: d.Pos, Group: d.Group, Wave: d.Wave, wavePos: d.WavePos,
			After: slices.Clone(d.After), Soak: d.Soak, KubeContext: d.KubeContext}
		f.Environments = append(f.Environments, e)
		if e.Group != "" {
			f.groups[e.Group] = append(f.groups[e.Group], e.Name)
		}
	}
	f.index()
	if err := f.resolveGates(); err != nil {
		return nil, err
	}
	if err := f.checkCycles(); err != nil {
		return nil, err
	}
	if err := f.assignWaves(); err != nil {
		return nil, err
	}
	for i, e := range f.Environments {
		for _, g := range e.Gates {
			if soak := f.Environments[f.byName[g]].Soak; soak > 0 {
				if f.Environments[i].GateSoaks == nil {
					f.Environments[i].GateSoaks = map[string]time.Duration{}
				}
				f.Environments[i].GateSoaks[g] = soak
			}
		}
	}
	slices.SortFunc(f.Environments, func(a, b Environment) int {
		return cmp.Or(cmp.Compare(a.Wave, b.Wave), cmp.Compare(a.Name, b.Name))
	})
	f.index()
	return f, nil
}

func (f *Fleet) index() {
	for i, e := range f.Environments {
		f.byName[e.Name] = i
	}
}

// assignWaves makes the waves the levels of the gate graph: an
// environment without gates is in wave 0, one with gates in the wave after
// the latest of them, so a gate always points into an earlier wave and two
// environments of one wave never wait for each other. An explicit
// rollout.wave may put an environment later than that, never earlier: a
// wave that contradicts a gate is an error naming both environments.
func (f *Fleet) assignWaves() error {
	done := make(map[string]bool, len(f.Environments))
	var visit func(i int) error
	visit = func(i int) error {
		e := &f.Environments[i]
		if done[e.Name] {
			return nil
		}
		level := 0
		for _, g := range e.Gates {
			gi := f.byName[g]
			if err := visit(gi); err != nil {
				return err
			}
			gate := f.Environments[gi]
			if e.wavePos != "" && e.Wave <= gate.Wave {
				return fault.Validationf("environment %q sets rollout.wave %d (at %s), but its gate %q runs in wave %d (%s): a gate must be in an earlier wave, or the two would run at once and %s's gate could never be met; drop rollout.wave (the gates decide the waves) or make it at least %d",
					e.Name, e.Wave, e.wavePos, gate.Name, gate.Wave, cmp.Or(gate.wavePos, "decided by its own gates, environment at "+gate.Pos), e.Name, gate.Wave+1)
			}
			level = max(level, gate.Wave+1)
		}
		if e.wavePos == "" {
			e.Wave = level
		}
		done[e.Name] = true
		return nil
	}
	for i := range f.Environments {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

// resolveGates expands each rollout.after entry (an environment, or a
// group when no environment has that name) to environments.
func (f *Fleet) resolveGates() error {
	for i := range f.Environments {
		e := &f.Environments[i]
		for _, a := range e.After {
			members, err := f.expand(a)
			if err != nil {
				return fault.Validationf("environment %q (at %s): rollout.after names %q: %v", e.Name, e.Pos, a, err)
			}
			for _, m := range members {
				if m == e.Name {
					return fault.Validationf("environment %q (at %s): rollout.after names %q, which includes the environment itself", e.Name, e.Pos, a)
				}
				if !slices.Contains(e.Gates, m) {
					e.Gates = append(e.Gates, m)
				}
			}
		}
		slices.Sort(e.Gates)
	}
	return nil
}

// checkCycles refuses a gate graph in which an environment waits, through
// others, for itself: such a fleet could never be rolled out.
func (f *Fleet) checkCycles() error {
	const (
		unseen = iota
		visiting
		done
	)
	state := make(map[string]int, len(f.Environments))
	var path []string
	var visit func(n string) error
	visit = func(n string) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			i := slices.Index(path, n)
			cycle := append(slices.Clone(path[i:]), n)
			e := f.Environments[f.byName[n]]
			return fault.Validationf("rollout.after has a cycle: %s (environment %q at %s): no environment of it could ever be applied; remove one of these gates", strings.Join(cycle, " waits for "), n, e.Pos)
		}
		state[n] = visiting
		path = append(path, n)
		for _, g := range f.Environments[f.byName[n]].Gates {
			if err := visit(g); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, e := range f.Environments {
		if err := visit(e.Name); err != nil {
			return err
		}
	}
	return nil
}

// expand turns a name into environments: the environment of that name,
// else the members of the group.
func (f *Fleet) expand(name string) ([]string, error) {
	if _, ok := f.byName[name]; ok {
		return []string{name}, nil
	}
	if m, ok := f.groups[name]; ok {
		return slices.Clone(m), nil
	}
	known := slices.Collect(func(yield func(string) bool) {
		for _, e := range f.Environments {
			if !yield(e.Name) {
				return
			}
		}
	})
	for g := range f.groups {
		known = append(known, g)
	}
	slices.Sort(known)
	hint := suggest.DidYouMean(name, known)
	if hint != "" {
		hint += " "
	}
	// Worded as render words an unknown environment.
	return nil, fmt.Errorf("environment or group %q is not declared; %senvironments and groups: %s", name, hint, strings.Join(known, ", "))
}

// Lookup returns the environment called name.
func (f *Fleet) Lookup(name string) (Environment, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Environment{}, false
	}
	return f.Environments[i], true
}

// Groups lists the group names, sorted.
func (f *Fleet) Groups() []string {
	var out []string
	for g := range f.groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Select resolves a selection: a comma list of environments and groups
// (a name that is both is the environment), or one group with asGroup.
// The result is sorted by wave, then name, without repeats.
func (f *Fleet) Select(spec string, asGroup bool) ([]Environment, error) {
	var names []string
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if asGroup {
			m, ok := f.groups[part]
			if !ok {
				hint := suggest.DidYouMean(part, f.Groups())
				if hint != "" {
					hint += "; "
				}
				return nil, fault.Validationf("no environment declares group %q; %sgroups: %s", part, hint, cmp.Or(strings.Join(f.Groups(), ", "), "none"))
			}
			names = append(names, m...)
			continue
		}
		m, err := f.expand(part)
		if err != nil {
			return nil, fault.Wrap(fault.Validation, err)
		}
		names = append(names, m...)
	}
	var out []Environment
	for _, e := range f.Environments {
		if slices.Contains(names, e.Name) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, fault.Validationf("%q selects no environment", spec)
	}
	return out, nil
}

// Waves groups environments by wave, in ascending order.
func Waves(envs []Environment) [][]Environment {
	var out [][]Environment
	for _, e := range envs {
		if n := len(out); n > 0 && out[n-1][0].Wave == e.Wave {
			out[n-1] = append(out[n-1], e)
			continue
		}
		out = append(out, []Environment{e})
	}
	return out
}
