// 5. Report: in rollout order, verified against the full path on request.

package review

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/pipeline/change"
	"github.com/opmodel/pipeline/pipeline/operation"
)

// reviewFleet is the fleet the head (else the base) declares. When the
// renders came from the cache and neither side was evaluated, it is read
// from the head's environments as its fingerprints evaluated them (and
// cached), else from those environments loaded alone, so a review reads
// in rollout order whether its renders were cached or not.
func reviewFleet(ctx context.Context, head, base *reviewSide) *fleet.Fleet {
	if f := cmp.Or(declaredFleet(head.d), declaredFleet(base.d)); f != nil {
		return f
	}
	if !head.present || head.err != nil || !head.nothingToRender {
		return nil
	}
	if head.tree != nil {
		f, err := head.tree.Fleet(ctx)
		if !errors.Is(err, fingerprint.ErrUnsure) {
			return f // nil when the fleet is wrong: the comment keeps plan order
		}
	}
	d, err := head.snap.Load(ctx, head.snap.EnvironmentsOnly(ctx))
	if err != nil {
		return nil
	}
	return declaredFleet(d)
}

// declaredFleet is the fleet d declares: nil when there is no deployment
// (a side not evaluated) or its fleet cannot be read.
func declaredFleet(d *load.Deployment) *fleet.Fleet {
	if d == nil {
		return nil
	}
	f, err := fleet.Read(d)
	if err != nil {
		return nil
	}
	return f
}

// groupByWave gives each release its environment's group and wave and,
// when the deployment has either, orders releases by wave, group and
// environment, so a fleet reads in the order it rolls out.
func groupByWave(cs *change.Set, f *fleet.Fleet) {
	for i, rc := range cs.Releases {
		if e, ok := f.Lookup(rc.Environment); ok {
			cs.Releases[i].Group, cs.Releases[i].Wave = e.Group, e.Wave
		}
	}
	orderByWave(cs)
}

// orderByWave orders releases by wave, group and environment when any
// has a group or a wave; otherwise they stay in plan order.
func orderByWave(cs *change.Set) {
	if !slices.ContainsFunc(cs.Releases, func(rc change.Release) bool { return rc.Group != "" || rc.Wave != 0 }) {
		return
	}
	slices.SortStableFunc(cs.Releases, func(a, b change.Release) int {
		return cmp.Or(cmp.Compare(a.Wave, b.Wave), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Environment, b.Environment))
	})
}

// verifyUnchanged, with OPM_VERIFY_SKIPS set, reviews again rendering
// every pair and fails loudly when a pair the fingerprints called
// unchanged renders differently on the two sides.
func (r *review) verifyUnchanged(ctx context.Context, cs *change.Set) error {
	if os.Getenv(operation.EnvVerifySkips) == "" || r.opts.NoSkip || len(cs.Unchanged) == 0 {
		return nil
	}
	// The same snapshots, every pair rendered, not a shard's: every shard
	// lists the same unchanged pairs, and a split names the pairs of the
	// review that skips.
	all := &review{opts: r.opts, head: r.head, base: r.base, scope: r.scope}
	all.opts.NoSkip, all.opts.Shard, all.opts.Split = true, nil, nil
	full, err := all.run(ctx)
	if err != nil {
		return fmt.Errorf("%s: reviewing every pair: %w", operation.EnvVerifySkips, err)
	}
	for _, u := range cs.Unchanged {
		for _, r := range full.Releases {
			if r.Key != u.Release || r.Environment != u.Environment {
				continue
			}
			if r.Error != "" || r.Counts.Changed() {
				return fmt.Errorf("%s: release %s (environment %q) was skipped as unchanged (inputs identical on both sides), but rendering both sides shows %s: "+
					"the skip was wrong. This is a bug in opm; --no-skip renders regardless", operation.EnvVerifySkips, u.Release, u.Environment, cmp.Or(r.Error, "changes"))
			}
		}
	}
	return nil
}
