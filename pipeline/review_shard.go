package pipeline

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/rendercache"
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
// neither identical on both sides nor outside both, in review order
// (environments outermost), dealt out one by one, so every shard of a
// review computes the same split from the same two commits, whatever its
// cache holds, and no shard has more than one pair more than another.
// Dealing by count rather than by recorded render cost is deliberate:
// runners restore caches of different ages, and a split that depended
// on them would render some pairs twice and others never.
func shardUnits(sh *Shard, head, base *reviewSide, envs, keys []string) error {
	if sh == nil {
		return nil
	}
	if sh.Index < 1 || sh.Index > sh.Count {
		return fault.Validationf("shard %s does not exist: a shard is I/N with 1 ≤ I ≤ N", sh)
	}
	head.elsewhere = map[string]bool{}
	n := 0
	for _, env := range envs {
		for _, key := range keys {
			if !worthReviewing(head, base, key, env) {
				continue
			}
			if n%sh.Count != sh.Index-1 {
				head.elsewhere[unitKey(env, key)] = true
			}
			n++
		}
	}
	return nil
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

// PartialReview is one shard's review, for `opm review merge`.
type PartialReview struct {
	Format string `json:"format"`
	Shard  Shard  `json:"shard"`
	// HeadCommit and the ChangeSet's BaseCommit say which two commits
	// were compared; Plan which pairs the review planned.
	HeadCommit string     `json:"headCommit"`
	Plan       string     `json:"plan"`
	ChangeSet  *ChangeSet `json:"changeSet"`
	// Units and Keys are, per release of ChangeSet, its place in the plan
	// and its key in `releases`.
	Units []int    `json:"units"`
	Keys  []string `json:"keys"`
}

// ReviewShard reviews opts.Shard's part of a review from git and returns
// it as a partial. The head must be a commit (no uncommitted changes):
// shards on other runners check out the same one.
func ReviewShard(ctx context.Context, opts ReviewOptions) (*PartialReview, error) {
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
	cs, err := Review(ctx, opts)
	if err != nil {
		return nil, err
	}
	p := &PartialReview{Format: PartialFormat, Shard: *opts.Shard, HeadCommit: st.Commit, Plan: cs.plan, ChangeSet: cs}
	for _, rc := range cs.Releases {
		p.Units = append(p.Units, rc.unit)
		p.Keys = append(p.Keys, rc.key)
	}
	return p, nil
}

// MergeReviews combines the partials of every shard of one review into
// the review they are parts of: the same releases in the same order as
// one unsharded review. It refuses partials of different reviews (base
// or head commit, plan, shard count), a shard given twice and a shard
// missing, naming which.
func MergeReviews(parts []*PartialReview) (*ChangeSet, error) {
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
				p.Shard, short(p.ChangeSet.BaseCommit), short(p.HeadCommit), first.Shard, short(first.ChangeSet.BaseCommit), short(first.HeadCommit))
		case p.Plan != first.Plan:
			return nil, fault.Validationf("shard %s and shard %s planned different pairs (another opm, or other options): run every shard with the same opm and options", p.Shard, first.Shard)
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
	cs := &ChangeSet{Operation: first.ChangeSet.Operation, Releases: []ReleaseChanges{}, Unchanged: first.ChangeSet.Unchanged,
		BaseRef: first.ChangeSet.BaseRef, BaseCommit: first.ChangeSet.BaseCommit}
	for _, p := range parts {
		for i, rc := range p.ChangeSet.Releases {
			rc.unit, rc.key = p.Units[i], p.Keys[i]
			cs.Releases = append(cs.Releases, rc)
			cs.Counts.AddAll(rc.Counts)
		}
	}
	slices.SortStableFunc(cs.Releases, func(a, b ReleaseChanges) int { return cmp.Compare(a.unit, b.unit) })
	orderByWave(cs)
	return cs, nil
}

// ReviewPlan is what a review would render, known before rendering
// anything: how many pairs, how many renders the cache already holds,
// and an estimate of the renders' cost, from the cost the cache recorded
// for the same release's other side (or DefaultRenderCost).
type ReviewPlan struct {
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
}

// DefaultRenderCost is assumed for a render nothing is known about: one
// release of the generated monorepo on the reference machine (2 cores).
const DefaultRenderCost = 250 * time.Millisecond

// PlanReview plans a review (ReviewOptions as for Review) without
// rendering: the Action's plan mode sizes a sharded review with it. A
// deployment whose inputs cannot be fingerprinted is loaded to plan it,
// and every pair counts as changed.
func PlanReview(ctx context.Context, opts ReviewOptions) (*ReviewPlan, error) {
	opts.planOnly, opts.Shard = true, nil
	cs, err := Review(ctx, opts)
	if err != nil {
		return nil, err
	}
	p := *cs.estimate
	p.Unchanged = len(cs.Unchanged)
	return &p, nil
}

// Shards is how many shards the plan needs so that each renders for at
// most target (one core each, renders spread evenly), between 1 and max.
func (p *ReviewPlan) Shards(target time.Duration, most int) int {
	if target <= 0 || p.Seconds <= 0 {
		return 1
	}
	n := int(math.Ceil(p.Seconds / target.Seconds()))
	return min(max(n, 1), max(most, 1))
}

// estimateRenders counts what the review's plan leaves to render.
func estimateRenders(cache *rendercache.Cache, head, base *reviewSide, envs, keys []string) *ReviewPlan {
	p := &ReviewPlan{}
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
			for _, side := range []*reviewSide{head, base} {
				if !side.declares(key, env) {
					continue
				}
				p.Renders++
				if side.cached[u] != nil {
					p.Cached++
					continue
				}
				p.Seconds += cmp.Or(known, DefaultRenderCost).Seconds()
			}
		}
	}
	return p
}
