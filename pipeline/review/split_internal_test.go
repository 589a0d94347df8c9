package review

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
)

// A split assigns every pair to exactly one existing shard, is the same
// on every machine, keeps a release's pairs on one shard unless the
// release alone costs more than a shard's share, and leaves no shard
// further above the average than the costliest unit it placed (Graham's
// bound for a greedy schedule; a unit is a release, or one pair of a
// release costlier than a share): checked on generated plans of skewed
// costs.
func TestSplitBalancesGeneratedPlans(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 1))
	for round := range 500 {
		pairs, n := rng.IntN(300), 1+rng.IntN(12)
		costs, keys := make([]float64, pairs), make([]string, pairs)
		releases := 1 + rng.IntN(pairs+1)
		for i := range costs {
			// Mostly small renders, a few a hundred times costlier.
			costs[i] = 0.005 + rng.Float64()*0.3
			if rng.IntN(20) == 0 {
				costs[i] *= 100
			}
			keys[i] = fmt.Sprintf("r%d", rng.IntN(releases))
		}
		p := &Plan{Plan: "plan-sha256:x", costs: costs, keys: keys}
		s := p.SplitInto(n)
		again := (&Plan{Plan: "plan-sha256:x", costs: slices.Clone(costs), keys: slices.Clone(keys)}).SplitInto(n)
		assert.DeepEqual(t, s.Assign, again.Assign)
		assert.Equal(t, len(s.Assign), pairs, "round %d", round)
		loads := make([]float64, n)
		var sum, most float64
		release := map[string]float64{}
		for i, a := range s.Assign {
			assert.Assert(t, a >= 1 && a <= n, "round %d: pair %d to shard %d of %d", round, i, a, n)
			loads[a-1] += costs[i]
			sum += costs[i]
			most = max(most, costs[i])
			release[keys[i]] += costs[i]
		}
		share := sum / float64(n)
		for i, a := range s.Assign {
			if release[keys[i]] > share {
				continue
			}
			for j := range i {
				if keys[j] == keys[i] {
					assert.Equal(t, s.Assign[j], a, "round %d: release %s (%.3fs, a share is %.3fs) is split", round, keys[i], release[keys[i]], share)
				}
			}
		}
		bound := sum/float64(n) + max(share, most)*(1-1/float64(n)) + 1e-9
		assert.Assert(t, slices.Max(loads) <= bound, "round %d: a shard has %.3fs, bound %.3fs", round, slices.Max(loads), bound)
		assert.NilError(t, s.check(&Shard{Index: 1, Count: n}, "plan-sha256:x", pairs))
	}
}

// Where costs cluster, dealing pairs by count puts the costly ones on one
// shard; the split by cost spreads them.
func TestSplitSpreadsWhatDealingByCountClusters(t *testing.T) {
	// Every third pair (a heavy release in each of three environments,
	// say) costs ten times the others.
	var costs []float64
	for i := range 30 {
		c := 0.1
		if i%3 == 0 {
			c = 1
		}
		costs = append(costs, c)
	}
	byCount := make([]float64, 3)
	for i, c := range costs {
		byCount[i%3] += c
	}
	s := (&Plan{costs: costs}).SplitInto(3)
	assert.Equal(t, slices.Max(byCount), 10.0)
	assert.Assert(t, slices.Max(s.Seconds) <= 4.1, "%v", s.Seconds)
}

// A split is refused when it is not for this review or shard count, or
// does not assign every pair to a shard that exists.
func TestSplitCheckRefusesAnotherReviewsSplit(t *testing.T) {
	s := (&Plan{Plan: "plan-sha256:a", costs: []float64{1, 2, 3}}).SplitInto(2)
	for want, c := range map[string]struct {
		sh    Shard
		plan  string
		pairs int
		edit  func(*Split)
	}{
		"made for another review": {Shard{1, 2}, "plan-sha256:b", 3, nil},
		"into 2 shards, not 3":    {Shard{1, 3}, "plan-sha256:a", 3, nil},
		"assigns 3 pairs":         {Shard{1, 2}, "plan-sha256:a", 4, nil},
		"to shard 7, which does":  {Shard{1, 2}, "plan-sha256:a", 3, func(s *Split) { s.Assign[1] = 7 }},
		"not one opm reads":       {Shard{1, 2}, "plan-sha256:a", 3, func(s *Split) { s.Format = "v0" }},
	} {
		c2 := *s
		c2.Assign = slices.Clone(s.Assign)
		if c.edit != nil {
			c.edit(&c2)
		}
		assert.ErrorContains(t, c2.check(&c.sh, c.plan, c.pairs), want)
	}
	assert.Equal(t, (*Split)(nil).digest(), "count")
	assert.Assert(t, s.digest() != (&Split{Format: SplitFormat, Plan: s.Plan, Shards: 2, Assign: []int{1, 1, 2}}).digest())
}
