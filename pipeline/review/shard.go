package review

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/pipeline/change"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// Shard is one part of a review split across CI runners: Index of Count,
// both from 1 ("2/8").
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads "I/N" (1 ≤ I ≤ N).
func ParseShard(s string) (*Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	a, aerr := strconv.Atoi(strings.TrimSpace(i))
	b, berr := strconv.Atoi(strings.TrimSpace(n))
	if !ok || aerr != nil || berr != nil || b < 1 || a < 1 || a > b {
		return nil, fault.Validationf("a shard is I/N with 1 ≤ I ≤ N, such as 2/8, not %q", s)
	}
	return &Shard{Index: a, Count: b}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// shardUnits leaves to the shard its part of the pairs to review: those
// neither identical on both sides nor outside both, in plan order
// (environments outermost). With a split (planned by PlanOf and
// handed to every shard), its part is what the split assigns it, balanced
// by the renders' recorded cost. Without one, the pairs are dealt out one
// by one, so every shard computes the same split from the same two
// commits whatever its cache holds, and no shard has more than one pair
// more than another. A shard never balances by its own cache's costs:
// runners restore caches of different ages, and a split that depended on
// them would render some pairs twice and others never.
func shardUnits(sh *Shard, split *Split, plan string, head, base *reviewSide, envs, keys []string) error {
	if sh == nil {
		if split != nil {
			return fault.Validationf("a split is used by a shard: give the shard (I/N) too")
		}
		return nil
	}
	if sh.Index < 1 || sh.Index > sh.Count {
		return fault.Validationf("shard %s does not exist: a shard is I/N with 1 ≤ I ≤ N", sh)
	}
	units := plannedUnits(head, base, envs, keys)
	if err := split.check(sh, plan, len(units)); err != nil {
		return err
	}
	head.elsewhere = map[string]bool{}
	for n, u := range units {
		mine := n%sh.Count == sh.Index-1
		if split != nil {
			mine = split.Assign[n] == sh.Index
		}
		if !mine {
			head.elsewhere[u] = true
		}
	}
	return nil
}

// plannedUnits are the pairs a review plans, in plan order (environments
// outermost), before any is left to another shard.
func plannedUnits(head, base *reviewSide, envs, keys []string) []string {
	var out []string
	for _, env := range envs {
		for _, key := range keys {
			if worthReviewing(head, base, key, env) {
				out = append(out, unitKey(env, key))
			}
		}
	}
	return out
}

// planDigest names the pairs a review plans, before sharding: shards of
// one review agree on it, partials of different reviews do not.
func planDigest(head, base *reviewSide, envs, keys []string) string {
	h := sha256.New()
	for _, env := range envs {
		for _, key := range keys {
			u := unitKey(env, key)
			if head.identical[u] {
				fmt.Fprintf(h, "=%s\x00", u)
			} else if head.err != nil || base.err != nil || head.declares(key, env) || base.declares(key, env) {
				fmt.Fprintf(h, "+%s\x00", u)
			}
		}
	}
	return "plan-sha256:" + hex.EncodeToString(h.Sum(nil))
}

// PartialFormat names the partial review format; merge refuses others.
const PartialFormat = "opm-partial-review-v1"

// Partial is one shard's review, for `opm review merge`.
type Partial struct {
	Format string `json:"format"`
	Shard  Shard  `json:"shard"`
	// HeadCommit and the change.Set's BaseCommit say which two commits
	// were compared; Plan which pairs the review planned.
	HeadCommit string `json:"headCommit"`
	Plan       string `json:"plan"`
	// Split says how the pairs were split: "count" (dealt out one by
	// one) or the digest of the planned split every shard was given.
	Split     string      `json:"split"`
	ChangeSet *change.Set `json:"changeSet"`
	// Units and Keys are, per release of ChangeSet, its place in the plan
	// and its key in `releases`.
	Units []int    `json:"units"`
	Keys  []string `json:"keys"`
}

// RunShard reviews opts.Shard's part of a review from git and returns
// it as a partial. The head must be a commit (no uncommitted changes):
// shards on other runners check out the same one.
func RunShard(ctx context.Context, opts Options) (*Partial, error) {
	ctx = operation.WithTransforms(ctx, opts.transforms())
	if opts.Shard == nil {
		return nil, fault.Validationf("a partial review needs a shard (I/N)")
	}
	if len(opts.BaseRefs) == 0 {
		return nil, fault.Validationf("a sharded review compares with a git ref (--base): shards on other runners must compare the same two commits")
	}
	st, err := gitref.StateOf(ctx, cmp.Or(opts.Dir, "."))
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("a sharded review needs a git checkout: %w", err))
	}
	if st.Dirty {
		return nil, fault.Validationf("the deployment directory has uncommitted changes: shards on other runners cannot review them; commit first")
	}
	return RunPart(ctx, opts, st.Commit)
}

// RunPart reviews opts.Shard's part of the review of head, which names
// the head side for Merge: RunShard's commit, or any name for a review of
// two directories (BaseDir) that every shard is given alike.
func RunPart(ctx context.Context, opts Options, head string) (*Partial, error) {
	// Shards mask Secret values with a key from the seal key (the CI
	// secret every runner of the review has), so the merged review shows
	// equal values equally across shards, as one review does.
	if opts.MaskKey == nil {
		opts.MaskKey = redact.From(ctx).Sealer().Derive("review-mask")
	}
	r, err := openReview(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.scope = head + r.scope
	cs, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	p := &Partial{Format: PartialFormat, Shard: *opts.Shard, HeadCommit: head, Plan: r.plan, Split: opts.Split.digest(), ChangeSet: cs}
	for _, rc := range cs.Releases {
		p.Units = append(p.Units, r.units[unitKey(rc.Environment, rc.Key)])
		p.Keys = append(p.Keys, rc.Key)
	}
	return p, nil
}

// Merge combines the partials of every shard of one review into
// the review they are parts of: the same releases in the same order as
// one unsharded review. It refuses partials of different reviews (base
// or head commit, plan, shard count), a shard given twice and a shard
// missing, naming which.
func Merge(parts []*Partial) (*change.Set, error) {
	if len(parts) == 0 {
		return nil, fault.Validationf("nothing to merge: give every shard's partial review")
	}
	first := parts[0]
	seen := map[int]bool{}
	for i, p := range parts {
		switch {
		case p.Format != PartialFormat:
			return nil, fault.Validationf("part %d is not a partial review (format %q, want %q)", i+1, p.Format, PartialFormat)
		case p.ChangeSet == nil || len(p.Units) != len(p.ChangeSet.Releases) || len(p.Keys) != len(p.Units):
			return nil, fault.Validationf("part %d (shard %s) is incomplete", i+1, p.Shard)
		case p.Shard.Count != first.Shard.Count:
			return nil, fault.Validationf("shard %s and shard %s split the review differently (%d and %d shards): merge the shards of one run", first.Shard, p.Shard, first.Shard.Count, p.Shard.Count)
		case p.HeadCommit != first.HeadCommit || p.ChangeSet.BaseCommit != first.ChangeSet.BaseCommit:
			return nil, fault.Validationf("shard %s compared %s with %s, but shard %s compared %s with %s: merge the shards of one review",
				p.Shard, gitref.Short(p.ChangeSet.BaseCommit), gitref.Short(p.HeadCommit), first.Shard, gitref.Short(first.ChangeSet.BaseCommit), gitref.Short(first.HeadCommit))
		case p.Plan != first.Plan:
			return nil, fault.Validationf("shard %s and shard %s planned different pairs (another opm, or other options): run every shard with the same opm and options", p.Shard, first.Shard)
		case p.Split != first.Split:
			return nil, fault.Validationf("shard %s and shard %s split the pairs differently (%s and %s): give every shard the same plan (--plan), or none", p.Shard, first.Shard, splitName(first.Split), splitName(p.Split))
		case seen[p.Shard.Index]:
			return nil, fault.Validationf("shard %s is given twice", p.Shard)
		}
		seen[p.Shard.Index] = true
	}
	var missing []string
	for i := 1; i <= first.Shard.Count; i++ {
		if !seen[i] {
			missing = append(missing, fmt.Sprintf("%d/%d", i, first.Shard.Count))
		}
	}
	if len(missing) > 0 {
		return nil, fault.Validationf("shard %s is missing: a review merged without it would leave pairs out", strings.Join(missing, ", "))
	}
	cs := &change.Set{Operation: first.ChangeSet.Operation, Releases: []change.Release{}, Unchanged: first.ChangeSet.Unchanged,
		BaseRef: first.ChangeSet.BaseRef, BaseCommit: first.ChangeSet.BaseCommit}
	type placed struct {
		unit int
		rc   change.Release
	}
	var all []placed
	for _, p := range parts {
		cs.HeadUncommitted = cs.HeadUncommitted || p.ChangeSet.HeadUncommitted
		for i, rc := range p.ChangeSet.Releases {
			rc.Key = p.Keys[i]
			all = append(all, placed{p.Units[i], rc})
			cs.Counts.AddAll(rc.Counts)
		}
	}
	slices.SortStableFunc(all, func(a, b placed) int { return cmp.Compare(a.unit, b.unit) })
	for _, p := range all {
		cs.Releases = append(cs.Releases, p.rc)
	}
	orderByWave(cs)
	return cs, nil
}

// Plan is what a review would render, known before rendering
// anything: how many pairs, how many renders the cache already holds,
// and an estimate of the renders' cost, from the cost the cache recorded
// for the same release's other side (or DefaultRenderCost).
type Plan struct {
	// Pairs are the release × environment pairs to review (neither
	// identical on both sides nor absent from both).
	Pairs int `json:"pairs"`
	// Unchanged pairs have equal input fingerprints: never rendered.
	Unchanged int `json:"unchanged"`
	// Renders are the renders those pairs need; Cached of them are in
	// the render cache.
	Renders int `json:"renders"`
	Cached  int `json:"cached"`
	// Seconds estimates the renders' total cost on one core.
	Seconds float64 `json:"seconds"`
	// Plan names the pairs, as partial reviews do: a split applies only
	// to the review it was planned for.
	Plan string `json:"plan"`
	// Split, once made (SplitInto), assigns the pairs to shards.
	Split *Split `json:"split,omitempty"`

	// costs are the pairs' estimated costs (seconds), in plan order, and
	// keys their releases.
	costs []float64
	keys  []string
}

// DefaultRenderCost is assumed for a render nothing is known about: one
// release of the generated monorepo on the reference machine (2 cores).
const DefaultRenderCost = 250 * time.Millisecond

// cachedRenderCost is what reading, verifying and comparing a cached
// render costs, so that pairs found in the cache are spread too.
const cachedRenderCost = 5 * time.Millisecond

// PlanOf plans a review (Options as for Run) without
// rendering: the Action's plan mode sizes a sharded review with it. A
// deployment whose inputs cannot be fingerprinted is loaded to plan it,
// and every pair counts as changed.
func PlanOf(ctx context.Context, opts Options) (*Plan, error) {
	opts.Shard, opts.Split = nil, nil
	r, err := openReview(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.planOnly = true
	cs, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	p := *r.estimate
	p.Unchanged = len(cs.Unchanged)
	p.Renders, p.Cached = cs.RenderCounts()
	p.Plan = r.plan
	return &p, nil
}

// Shards is how many shards the plan needs so that each renders for at
// most target (one core each, renders spread evenly), between 1 and max.
func (p *Plan) Shards(target time.Duration, most int) int {
	if target <= 0 || p.Seconds <= 0 {
		return 1
	}
	n := int(math.Ceil(p.Seconds / target.Seconds()))
	return min(max(n, 1), max(most, 1))
}

// SplitFormat names the split format; shards refuse others.
const SplitFormat = "opm-review-split-v1"

// Split assigns each pair of a review's plan to a shard, balancing
// the shards' estimated render costs. It is made once, by the job that
// plans the review, and handed to every shard job (a file, an artifact in
// CI), as Nx Cloud's and Knapsack Pro's orchestrators hand agents their
// tasks by recorded duration: every shard then splits alike, whatever
// its own cache holds.
type Split struct {
	Format string `json:"format"`
	// Plan is the plan the split was made for (Plan.Plan).
	Plan string `json:"plan"`
	// Shards is how many shards there are; Seconds the estimated
	// rendering of each.
	Shards  int       `json:"shards"`
	Seconds []float64 `json:"seconds"`
	// Assign gives, for each pair in plan order, its shard (1..Shards).
	Assign []int `json:"assign"`
}

// SplitInto splits the plan's pairs into n shards (at least one) by
// estimated cost, records the split in the plan and returns it.
//
// A release's pairs stay together: a shard evaluates each of its releases
// once whatever the environments, so a release split across shards is
// evaluated by each. Only a release costlier than a shard's share is
// split into its pairs. The units (releases, or pairs of a split one) go
// by the longest-processing-time rule: the costliest first, each to the
// shard with the least so far (the lowest-numbered on a tie), so no shard
// exceeds the average by more than the costliest unit. Units of equal
// cost keep plan order, so the split is the same on every machine.
func (p *Plan) SplitInto(n int) *Split {
	n = max(n, 1)
	type unit struct {
		pairs []int
		cost  float64
	}
	var total float64
	var releases []unit
	of := map[string]int{}
	for i, c := range p.costs {
		total += c
		key := strconv.Itoa(i) // a pair of no known release stands alone
		if i < len(p.keys) {
			key = p.keys[i]
		}
		j, ok := of[key]
		if !ok {
			j = len(releases)
			of[key] = j
			releases = append(releases, unit{})
		}
		releases[j].pairs = append(releases[j].pairs, i)
		releases[j].cost += c
	}
	var units []unit
	for _, r := range releases {
		if r.cost <= total/float64(n) || len(r.pairs) == 1 {
			units = append(units, r)
			continue
		}
		for _, i := range r.pairs {
			units = append(units, unit{pairs: []int{i}, cost: p.costs[i]})
		}
	}
	slices.SortStableFunc(units, func(a, b unit) int { return cmp.Compare(b.cost, a.cost) })
	s := &Split{Format: SplitFormat, Plan: p.Plan, Shards: n, Seconds: make([]float64, n), Assign: make([]int, len(p.costs))}
	for _, u := range units {
		least := 0
		for j := 1; j < n; j++ {
			if s.Seconds[j] < s.Seconds[least] {
				least = j
			}
		}
		for _, i := range u.pairs {
			s.Assign[i] = least + 1
		}
		s.Seconds[least] += u.cost
	}
	for j := range s.Seconds {
		s.Seconds[j] = math.Round(s.Seconds[j]*1000) / 1000
	}
	p.Split = s
	return s
}

// Pairs is how many pairs the split gives each shard.
func (s *Split) Pairs() []int {
	count := make([]int, s.Shards)
	for _, a := range s.Assign {
		count[a-1]++
	}
	return count
}

// MergeFiles merges the partial reviews shards wrote (opm review
// --shard -o json, the Action's and Dagger's review-shard), named in any
// order: what `opm review merge`, the Action's merge mode and Dagger's
// merge-reviews do (see Merge).
func MergeFiles(names ...string) (*change.Set, error) {
	parts := make([]*Partial, len(names))
	for i, name := range names {
		parts[i] = &Partial{}
		if err := readJSON(name, "partial review", "opm review --shard -o json writes them", parts[i]); err != nil {
			return nil, err
		}
	}
	return Merge(parts)
}

// readJSON reads file name into v: a missing file is not-found, one that
// does not decode says it is no what, and what writes them.
func readJSON(name, what, writer string, v any) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return fault.Wrap(fault.NotFound, fmt.Errorf("reading the %s %s: %w", what, name, err))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fault.Wrap(fault.Validation, fmt.Errorf("reading the %s %s: it is not one (%s): %w", what, name, writer, err))
	}
	return nil
}

// ReadSplit reads the split of a plan written as JSON (opm review plan
// -o json, the Action's review-plan-file).
func ReadSplit(name string) (*Split, error) {
	var p Plan
	if err := readJSON(name, "review plan", "opm review plan -o json writes them", &p); err != nil {
		return nil, err
	}
	if p.Split == nil {
		return nil, fault.Validationf("the review plan %s has no split: make it with opm review plan --shards N (or --target) -o json", name)
	}
	return p.Split, nil
}

// check refuses a split made for another review (other pairs) or shard
// count, or not covering the plan's pairs: a shard given it would review
// the wrong part. A split made before a push that left the pairs as they
// were is accepted: it still gives each pair to one shard.
func (s *Split) check(sh *Shard, plan string, pairs int) error {
	switch {
	case s == nil:
		return nil
	case s.Format != SplitFormat:
		return fault.Validationf("the plan's split is not one opm reads (format %q, want %q): plan again with this opm (opm review plan)", s.Format, SplitFormat)
	case s.Plan != plan:
		return fault.Validationf("the plan's split was made for another review (its pairs differ: a release or environment added or removed, other options or another opm): plan again from this checkout (opm review plan)")
	case s.Shards != sh.Count:
		return fault.Validationf("the plan splits the review into %d shards, not %d: run shards 1/%d to %d/%d", s.Shards, sh.Count, s.Shards, s.Shards, s.Shards)
	case len(s.Assign) != pairs:
		return fault.Validationf("the plan's split assigns %d pairs, but the review has %d: plan again (opm review plan)", len(s.Assign), pairs)
	}
	for i, a := range s.Assign {
		if a < 1 || a > s.Shards {
			return fault.Validationf("the plan's split assigns pair %d to shard %d, which does not exist (1 to %d): plan again (opm review plan)", i+1, a, s.Shards)
		}
	}
	return nil
}

// digest names the split a partial review used: "count" when the pairs
// were dealt out one by one.
func (s *Split) digest() string {
	if s == nil {
		return "count"
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00", s.Format, s.Plan, s.Shards)
	for _, a := range s.Assign {
		fmt.Fprintf(h, "%d,", a)
	}
	return "split-sha256:" + hex.EncodeToString(h.Sum(nil))
}

// splitName says in words how a partial's pairs were split.
func splitName(d string) string {
	if d == "count" || d == "" {
		return "by count"
	}
	return "by the plan " + d[:min(len(d), len("split-sha256:")+12)]
}

// estimateRenders estimates each pair of the review's plan: its cost is its
// renders not in the cache, at the cost the cache recorded for either
// side of the pair (or DefaultRenderCost), and its cached reads. The
// renders and cache hits themselves are counted by countRenders.
func estimateRenders(cache *rendercache.Cache, head, base *reviewSide, envs, keys []string) *Plan {
	p := &Plan{costs: []float64{}}
	for _, env := range envs {
		for _, key := range keys {
			if !worthReviewing(head, base, key, env) {
				continue
			}
			p.Pairs++
			u := unitKey(env, key)
			var known time.Duration
			for _, side := range []*reviewSide{head, base} {
				if c, ok := cache.Cost(side.fps[u]); ok {
					known = max(known, c)
				}
			}
			// Seconds counts renders only (the shards' target is
			// rendering); a pair's cost for the split counts reads too.
			var rendering, reading time.Duration
			for _, side := range []*reviewSide{head, base} {
				if !side.declares(key, env) {
					continue
				}
				if side.cached[u] != nil {
					reading += cachedRenderCost
					continue
				}
				rendering += cmp.Or(known, DefaultRenderCost)
			}
			p.Seconds += rendering.Seconds()
			p.costs = append(p.costs, (rendering + reading).Seconds())
			p.keys = append(p.keys, key)
		}
	}
	return p
}
