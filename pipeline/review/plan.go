// 1. Plan the pairs: read both sides (parsed and fingerprinted when the
// syntax allows, loaded otherwise), choose the environments and releases,
// set apart the pairs whose inputs are equal on both sides, and (see
// shard.go) leave a shard its part.

package review

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/engine/suggest"
	"github.com/opmodel/pipeline/engine/workers"
	"github.com/opmodel/pipeline/pipeline/change"
	"github.com/opmodel/pipeline/pipeline/snapshot"
)

// scanReviewSides parses both sides without evaluating them. ok is false
// when fingerprints cannot decide (NoSkip, syntax the scan cannot follow,
// a group or an unknown name asked for): then both sides are loaded as
// before.
func scanReviewSides(ctx context.Context, opts Options, headSnap, baseSnap *snapshot.Snapshot) (head, base *reviewSide, ok bool) {
	if opts.NoSkip {
		return nil, nil, false
	}
	scan := func(name string, snap *snapshot.Snapshot, required bool) (*reviewSide, bool) {
		s := &reviewSide{name: name, snap: snap}
		if !required && snap.Absent() {
			return s, true
		}
		t, err := snap.Scan(ctx, opts.cache())
		if err != nil {
			return nil, false
		}
		if t.Sure() != nil {
			return nil, false
		}
		envs, exact := t.Environments(ctx)
		if !exact {
			return nil, false
		}
		s.present, s.tree, s.releases, s.envs = true, t, t.Releases(), envs
		s.index()
		return s, true
	}
	// One side after the other: cue/load parses in parallel already.
	if head, ok = scan("head", headSnap, true); !ok {
		return nil, nil, false
	}
	if base, ok = scan("base", baseSnap, false); !ok {
		return nil, nil, false
	}
	// Groups are read by evaluating environments: leave them to the load.
	want := slices.Clone(opts.Environments)
	if len(want) == 0 && opts.Environment != "" {
		want = strings.Split(opts.Environment, ",")
	}
	all := reviewUnion(head.envs, base.envs)
	for _, e := range want {
		if !slices.Contains(all, strings.TrimSpace(e)) {
			return nil, nil, false
		}
	}
	if opts.Group != "" {
		return nil, nil, false
	}
	return head, base, true
}

// loadReviewSides loads the head and the base, at the same time when more
// than one render may run at once: each gets its own CUE context, and the
// review cannot start before both are read.
func loadReviewSides(ctx context.Context, opts Options, headSnap, baseSnap *snapshot.Snapshot) (head, base *reviewSide) {
	loadHead := func() { head = loadReviewSide(ctx, "head", headSnap, true) }
	loadBase := func() { base = loadReviewSide(ctx, "base", baseSnap, false) }
	if workers.Count(2, opts.Parallelism) < 2 {
		loadHead()
		loadBase()
		return head, base
	}
	var g workers.Group
	g.Go(loadBase)
	loadHead()
	g.Wait()
	return head, base
}

// reviewSide is one loaded version of the deployment directory.
type reviewSide struct {
	name string
	snap *snapshot.Snapshot
	// present: the side exists (a missing base is an empty side).
	present  bool
	d        *load.Deployment // nil until loaded (a scanned side loads when first rendered)
	err      error            // loading failed; every release on this side errs
	releases []string
	envs     []string
	// declared is releases × envs as a set (unitKey), for declares: a
	// review asks it for every pair, several times.
	declared map[string]bool
	// tree is the side as parsed, when its fingerprints can be trusted.
	tree *fingerprint.Tree
	// pruned prunes the side to the releases that are rendered
	// (fingerprint.PrunedRoot); nil loads everything.
	pruned map[string][]byte
	// identical (head side only) are the env × release units whose input
	// fingerprints are equal on both sides: unchanged, never rendered.
	// elsewhere (head side only) are the units another shard reviews.
	identical, elsewhere map[string]bool
	// cache holds renders by fingerprint; cached are this side's units
	// found there (never rendered), fps the fingerprints of its units.
	cache  *rendercache.Cache
	cached map[string]*render.Release
	fps    map[string]string
	// nothingToRender: every unit of this side was found in the cache.
	nothingToRender bool
	// chunk (head side only), when set, are the releases rendered now;
	// the others' pairs wait for their chunk.
	chunk map[string]bool
	// session renders from d (renderOne).
	session *render.Session
}

func unitKey(env, key string) string { return env + "\x00" + key }

// load evaluates a side that was only scanned so far.
func (s *reviewSide) load(ctx context.Context) {
	if s.d != nil || s.err != nil || !s.present || s.nothingToRender {
		return
	}
	// The side's releases and environments are known (scanned, or read
	// by the load this copies): listing them again evaluated every
	// release beside its render, a tenth of a review's CPU.
	d, err := s.snap.Load(ctx, s.pruned)
	if err != nil {
		s.err = fmt.Errorf("loading the %s: %w", s.name, err)
		return
	}
	s.d = d
}

// loadReviewSide evaluates a snapshot whole. A missing base directory, or
// one that is not a CUE module, is an empty side (the deployment is new),
// not an error.
func loadReviewSide(ctx context.Context, name string, snap *snapshot.Snapshot, required bool) *reviewSide {
	s := &reviewSide{name: name, snap: snap}
	if !required && snap.Absent() {
		return s
	}
	s.present = true
	d, err := snap.Load(ctx, nil)
	if err != nil {
		s.err = fmt.Errorf("loading the %s: %w", name, err)
		return s
	}
	s.d = d
	if s.releases, err = load.FieldNames(d.Root.LookupPath(cue.ParsePath("releases"))); err != nil {
		s.err = fault.Wrap(fault.Validation, fmt.Errorf("reading the %s's releases:\n%s", name, load.Describe(err)))
	}
	if s.envs, err = load.FieldNames(d.Root.LookupPath(cue.ParsePath("environments"))); err != nil {
		s.err = fault.Wrap(fault.Validation, fmt.Errorf("reading the %s's environments:\n%s", name, load.Describe(err)))
	}
	s.index()
	return s
}

// index fills declared from releases and envs.
func (s *reviewSide) index() {
	s.declared = make(map[string]bool, len(s.releases)*(len(s.envs)+1))
	for _, key := range s.releases {
		s.declared[unitKey("", key)] = true
		for _, env := range s.envs {
			s.declared[unitKey(env, key)] = true
		}
	}
}

// declares reports whether the side declares release key in env.
func (s *reviewSide) declares(key, env string) bool {
	return s.present && s.err == nil && s.declared[unitKey(env, key)]
}

func reviewEnvironments(opts Options, head, base *reviewSide) ([]string, error) {
	want := opts.Environments
	if len(want) == 0 && opts.Environment != "" {
		want = strings.Split(opts.Environment, ",")
	}
	if opts.Group != "" {
		want = append(want, opts.Group)
	}
	all := reviewUnion(head.envs, base.envs)
	want = expandGroups(want, all, head, base)
	if len(want) == 0 {
		if len(all) == 0 {
			return []string{""}, nil
		}
		return all, nil
	}
	var out []string
	for _, e := range want {
		if !slices.Contains(all, e) && head.err == nil {
			return nil, fault.Validationf("environment %q is declared neither in the head nor in the base; %senvironments: %v", e, didYouMean(e, all), all)
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// expandGroups replaces each name that is no environment but a group of
// the head (else the base) by the group's environments, in wave order.
func expandGroups(names, envs []string, head, base *reviewSide) []string {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if slices.Contains(envs, n) {
			out = append(out, n)
			continue
		}
		expanded := false
		for _, side := range []*reviewSide{head, base} {
			if side.d == nil || expanded {
				continue
			}
			if f, err := fleet.Read(side.d); err == nil {
				if members, err := f.Select(n, true); err == nil {
					for _, m := range members {
						out = append(out, m.Name)
					}
					expanded = true
				}
			}
		}
		if !expanded {
			out = append(out, n) // reported as undeclared below
		}
	}
	return out
}

// didYouMean is "did you mean …? " for a mistyped name, or "".
func didYouMean(name string, known []string) string {
	if s := suggest.DidYouMean(name, known); s != "" {
		return s + " "
	}
	return ""
}

func reviewReleases(opts Options, head, base *reviewSide) ([]string, error) {
	all := reviewUnion(head.releases, base.releases)
	if len(opts.Releases) == 0 {
		return all, nil
	}
	var out []string
	for _, r := range opts.Releases {
		if !slices.Contains(all, r) && head.err == nil {
			return nil, fault.Validationf("release %q is declared neither in the head nor in the base; %sreleases: %v", r, didYouMean(r, all), all)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, nil
}

func reviewUnion(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// identicalUnits finds the release × environment units both sides
// declare with equal input fingerprints, marks them on the head side so
// nothing renders them, and returns them in review order.
func identicalUnits(ctx context.Context, opts Options, head, base *reviewSide, envs, keys []string) []change.UnchangedRelease {
	if head.tree == nil || base.tree == nil {
		return nil
	}
	ro := opts.Selection.RenderOptions(ctx)
	type pair struct {
		env, key  string
		identical bool
	}
	var pairs []pair
	for _, env := range envs {
		for _, key := range keys {
			if head.declares(key, env) && base.declares(key, env) {
				pairs = append(pairs, pair{env: env, key: key})
			}
		}
	}
	// Two fingerprints per pair, for every pair of a monorepo: on every
	// core (a Tree is safe for concurrent use).
	workers.Run(ctx, workers.Count(len(pairs), opts.Parallelism), len(pairs), func(i int) {
		p := &pairs[i]
		in := fingerprint.Inputs{Environment: p.env, ValuesFiles: ro.ValuesFiles, Values: ro.Values}
		h, herr := head.tree.Of(ctx, p.key, in)
		b, berr := base.tree.Of(ctx, p.key, in)
		p.identical = herr == nil && berr == nil && h == b
	})
	var out []change.UnchangedRelease
	head.identical = map[string]bool{}
	for _, p := range pairs {
		if p.identical {
			head.identical[unitKey(p.env, p.key)] = true
			out = append(out, change.UnchangedRelease{Release: p.key, Environment: p.env})
		}
	}
	return out
}

// worthReviewing reports whether a release × environment is anything to report:
// not when neither side declares it there (an environment of one side
// crossed with a release of the other).
func worthReviewing(head, base *reviewSide, key, env string) bool {
	if head.identical[unitKey(env, key)] || head.elsewhere[unitKey(env, key)] || (head.chunk != nil && !head.chunk[key]) {
		return false
	}
	return head.err != nil || base.err != nil || head.declares(key, env) || base.declares(key, env)
}

// chunkReleases is the most releases a chunk of a review renders: in
// the generated monorepo (one Deployment and one ConfigMap each) a root
// pruned to 125 releases renders each in a third of the time the whole
// root of 1 000 does. With a chunk per core, chunks of 32 review 1 000 ×
// 3 pairs 4–8% faster than chunks of 64 with 0.9× the memory; chunks of
// 16 take 1.2× the time, each chunk's evaluation of the catalog weighing.
const chunkReleases = 32

// releasesToRender are the releases of the pairs reviewed here that are
// rendered on at least one side: the others' pairs are unchanged, another
// shard's, or found in the render cache on both sides.
func releasesToRender(head, base *reviewSide, envs, keys []string) []int {
	var out []int
	for i, key := range keys {
		for _, env := range envs {
			if worthReviewing(head, base, key, env) && (head.cached[unitKey(env, key)] == nil || base.cached[unitKey(env, key)] == nil) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// splitChunks deals releases (indexes into keys) into chunks of at most
// size, their number a multiple of workers and their sizes within one of
// each other, so the workers finish together.
func splitChunks(releases []int, size, workers int) [][]int {
	n := (len(releases) + size - 1) / size
	n = (n + workers - 1) / workers * workers
	var out [][]int
	for c := range n {
		part := releases[c*len(releases)/n : (c+1)*len(releases)/n]
		if len(part) > 0 {
			out = append(out, part)
		}
	}
	return out
}
