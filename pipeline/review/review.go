// Package review compares two snapshots of a deployment directory without
// a cluster (`opm review`, the Action's pull-request comment). One planner
// (review.run) is the path every review takes — a whole review, a shard,
// a plan, the check OPM_VERIFY_SKIPS asks for — in five steps, a file
// each, in that order: plan the pairs (plan.go), look them up in the
// render cache (cache.go), render the misses, all at once or in chunks
// (render.go), compare (compare.go, highlights.go), report (report.go).
// pipeline/snapshot reads a side (the working tree, or a commit from git's
// objects or a checkout); shard.go splits a review across runners and
// merges the parts. pipeline gives it to the front doors as Review.
package review

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/pipeline/change"
	"github.com/opmodel/pipeline/pipeline/operation"
	"github.com/opmodel/pipeline/pipeline/snapshot"
)

// Options are the options of Run (and of RunShard, RunPart and PlanOf).
type Options struct {
	// Selection is the head side: the deployment directory as proposed,
	// the releases to review (default all, on either side) and values
	// files (applied to both sides). Selection.Environment is used when
	// Environments is empty.
	operation.Selection
	// BaseDir is the same deployment directory as of the base ref (for
	// example inside a gitref worktree). A directory that does not exist
	// means the deployment is new: every release is added.
	BaseDir string `json:"baseDir"`
	// Environments are reviewed one after the other; default all declared
	// on either side, or none when neither declares any.
	Environments []string `json:"environments,omitempty"`
	// BaseRefs, instead of BaseDir, name the base in the git repository
	// that holds Dir: candidates tried in order (a branch, origin/<branch>,
	// a commit). The base is the merge base of the first that exists and
	// HEAD, checked out into a temporary worktree as the Action does.
	BaseRefs []string `json:"baseRefs,omitempty"`
	// Parallelism bounds how many release × environment reviews run at
	// once (each goroutine loads both sides again); one per core when < 1.
	Parallelism int `json:"parallelism,omitempty"`
	operation.Protection
	// NoSkip renders every release on both sides, even those whose input
	// fingerprints are equal, and reads nothing from the render cache.
	NoSkip bool `json:"noSkip,omitempty"`
	// NoCache reads and writes no cache of any kind (renders, evaluated
	// environments, identities, components' transforms).
	NoCache bool `json:"noCache,omitempty"`
	// CacheDir, when set, is where this review keeps its cache instead of
	// OPM_CACHE_DIR or the user cache directory:
	// the Dagger module restores it from a cache volume.
	CacheDir string `json:"-"`
	// CacheKey authenticates the cache's entries, of every kind: written
	// with an HMAC under it, read only when theirs verifies, so whoever can
	// write a shared cache without the key cannot make a review show a
	// forged render or forged environments. Nil: OPM_CACHE_KEY; empty there too: unkeyed (a cache only
	// this user writes).
	CacheKey []byte `json:"-"`
	// Shard, when set, reviews only its part of the pairs (see Shard):
	// the part Split assigns it when set (see Plan.SplitInto), else
	// every Count-th pair.
	Shard *Shard `json:"shard,omitempty"`
	Split *Split `json:"split,omitempty"`
	// MaskKey, when set, keys the markers of masked Secret values for
	// this review (its commits and pairs): shards given the same key mask
	// equal values equally, so their merge compares them as one review
	// does. Nil: RunShard derives one from the context's seal key
	// (redact), and Run draws a random one.
	MaskKey []byte `json:"-"`
	// Chunk is the most releases rendered at once (32 when < 1, see
	// chunkReleases): fewer hold less in memory, and make a small review
	// cross chunk boundaries as a large one does.
	Chunk int `json:"-"`
}

// Run compares two versions of a deployment directory without a
// cluster: every selected release × environment is rendered on both sides
// and, per release, objects are classified as added, modified (with a
// diff), unchanged or stale. Stale is the base's objects minus the head's
// after the component-rename check — what apply would prune if the base
// was what the cluster runs. A release that fails to render on one side
// gets Error and the others are still reviewed; Run itself fails only
// when neither side can be loaded or the selection names something that
// does not exist.
func Run(ctx context.Context, opts Options) (*change.Set, error) {
	ctx = operation.WithTransforms(ctx, opts.transforms())
	r, err := openReview(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.run(ctx)
}

// review is one review: its options, the two snapshots it compares, and
// how it runs where the public options say nothing (a shard's mask scope,
// stopping after the plan). Every entry point — Run, RunShard, RunPart,
// PlanOf, and the check OPM_VERIFY_SKIPS asks for — opens one and runs
// it; none calls another.
type review struct {
	opts       Options
	head, base *snapshot.Snapshot
	// repo and baseRef, for a base read from git: the repository and the
	// ref the base was resolved from.
	repo, baseRef string
	// headDirty: the head's working tree has uncommitted changes.
	headDirty bool
	// scope names the review's commits for KeyedMasker.
	scope string
	// planOnly stops the run after its plan (PlanOf).
	planOnly bool
	// masker masks Secret values, one key per run.
	masker *diff.Masker
	// plan names the pairs the run planned (planDigest), estimate what
	// rendering them would cost (planOnly), and units each reviewed
	// pair's place in the plan (environments outermost), by unitKey: a
	// merge of shards orders by them.
	plan     string
	estimate *Plan
	units    map[string]int
}

// openReview finds the two snapshots of a review: the head's working
// tree, and the base's directory or, with BaseRefs, the merge base of the
// first ref that resolves and HEAD (read from git's objects, or checked
// out with NoSkip or when the objects cannot stand for a checkout).
func openReview(ctx context.Context, opts Options) (_ *review, err error) {
	r := &review{opts: opts, head: snapshot.Worktree(opts.RenderOptions(ctx).Dir)}
	if !opts.NoSkip {
		r.head.ScanAhead(ctx, opts.cache())
		defer func() {
			if err != nil {
				r.head.Wait()
			}
		}()
	}
	if len(opts.BaseRefs) == 0 {
		r.base = snapshot.Worktree(opts.BaseDir)
		return r, nil
	}
	dir, err := filepath.Abs(r.head.Dir())
	if err != nil {
		return nil, fmt.Errorf("finding the deployment directory %s: %w", opts.Dir, err)
	}
	if r.repo, err = gitref.Root(ctx, dir); err != nil {
		return nil, fault.Wrap(fault.Validation, err)
	}
	// The head is the working tree, not HEAD: say so when they differ.
	if st, err := gitref.StateOf(ctx, dir); err == nil {
		r.headDirty = st.Dirty
	}
	ref, commit, err := snapshot.ResolveFirst(ctx, r.repo, opts.BaseRefs)
	if err != nil {
		return nil, err
	}
	mergeBase, err := gitref.MergeBase(ctx, r.repo, commit, "HEAD")
	if err != nil {
		return nil, err
	}
	if r.base, err = snapshot.Commit(ctx, r.repo, dir, mergeBase, !opts.NoSkip, opts.cache()); err != nil {
		return nil, err
	}
	r.baseRef, r.scope = ref, "\x00"+mergeBase
	return r, nil
}

// close removes what the base's snapshot wrote.
func (r *review) close() { r.base.Close() }

// run is the review's one plan: plan the pairs, look them up in the
// render cache, render the misses, compare, report.
func (r *review) run(ctx context.Context) (*change.Set, error) {
	opts := r.opts
	head, base, scanned := scanReviewSides(ctx, opts, r.head, r.base)
	if !scanned {
		head, base = loadReviewSides(ctx, opts, r.head, r.base)
	}
	if head.err != nil && !base.present {
		// Nothing to review against: report the head's error itself.
		return nil, head.err
	}
	envs, err := reviewEnvironments(opts, head, base)
	if err != nil {
		return nil, err
	}
	keys, err := reviewReleases(opts, head, base)
	if err != nil {
		return nil, err
	}
	if len(opts.ValuesFiles)+len(opts.InlineValues)+len(opts.SecretValues) > 0 && len(keys) != 1 {
		return nil, fault.Validationf("values files apply to exactly one release, but %d are selected: select one release", len(keys))
	}
	cs := &change.Set{Operation: "review", Releases: []change.Release{}}
	r.units = map[string]int{}
	// 1. Plan the pairs: those whose inputs are equal on both sides are
	// unchanged; of the rest, a shard takes its part.
	cs.Unchanged = identicalUnits(ctx, opts, head, base, envs, keys)
	r.plan = planDigest(head, base, envs, keys)
	// One key for the whole output: equal Secret values mask equally, in
	// every shard of the review when they share MaskKey.
	r.masker = diff.KeyedMasker(opts.MaskKey, r.scope+"\x00"+r.plan)
	if err := shardUnits(opts.Shard, opts.Split, r.plan, head, base, envs, keys); err != nil {
		return nil, err
	}
	// 2. Look the rest up in the render cache, by fingerprint.
	cache := reviewCache(opts, scanned)
	lookUpRenders(ctx, opts, cache, head, base, envs, keys)
	cs.SetRenderCounts(countRenders(head, base, envs, keys))
	if r.planOnly {
		r.estimate = estimateRenders(cache, head, base, envs, keys)
		return cs, nil
	}
	// 3. Render what is left, each scanned side evaluated only as far as
	// the misses reach (not at all for a side all found in the cache);
	// many releases in chunks, one per core at a time.
	// 4. Compare every pair (in chunks, as each chunk's renders are done).
	results, rollout, err := r.renderAndCompare(ctx, scanned, head, base, envs, keys)
	if err != nil {
		return nil, err
	}
	// 5. Report.
	if cache != nil {
		_ = cache.Trim()
	}
	for i, res := range results {
		if !res.ok {
			continue
		}
		r.units[unitKey(res.rc.Environment, res.rc.Key)] = i
		cs.Releases = append(cs.Releases, res.rc)
		cs.Counts.AddAll(res.rc.Counts)
	}
	if rollout == nil {
		rollout = reviewFleet(ctx, head, base)
	}
	if rollout != nil {
		groupByWave(cs, rollout)
	}
	if err := r.verifyUnchanged(ctx, cs); err != nil {
		return nil, err
	}
	r.relativeToRepo(cs)
	return cs, nil
}

// relativeToRepo names the base of a review from git, and the files its
// errors and warnings name relative to the repository: they read better
// so and do not show this machine's layout.
func (r *review) relativeToRepo(cs *change.Set) {
	if r.repo == "" {
		return
	}
	cs.BaseRef, cs.BaseCommit, cs.HeadUncommitted = r.baseRef, r.base.Revision(), r.headDirty
	prefixes := []string{r.repo + string(filepath.Separator), r.base.Root() + string(filepath.Separator)}
	for i := range cs.Releases {
		rc := &cs.Releases[i]
		for _, p := range prefixes {
			rc.Error = strings.ReplaceAll(rc.Error, p, "")
			for j := range rc.Warnings {
				rc.Warnings[j] = strings.ReplaceAll(rc.Warnings[j], p, "")
			}
		}
	}
}

// BaseRef is what a base named by a user or a workflow resolves from, in
// order: the ref as given, then the remote-tracking branch of that name
// (a CI checkout often fetches origin/main without a local main).
func BaseRef(ref string) []string { return []string{ref, "origin/" + ref} }
