// Review: two snapshots of a deployment directory compared without a
// cluster. One planner (review.run) is the path every review takes — a
// whole review, a shard, a plan, the check OPM_VERIFY_SKIPS asks for —
// in five steps, each below in that order: plan the pairs, look them up
// in the render cache, render the misses (all at once, or in chunks),
// compare, report. snapshot.go reads a side (the working tree, or a
// commit from git's objects or a checkout); review_shard.go splits a
// review across runners and merges the parts.

package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cuelang.org/go/cue"
	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/engine/suggest"
	"github.com/opmodel/pipeline/engine/taint"
)

// ReviewOptions are the options of Review.
type ReviewOptions struct {
	// Selection is the head side: the deployment directory as proposed,
	// the releases to review (default all, on either side) and values
	// files (applied to both sides). Selection.Environment is used when
	// Environments is empty.
	Selection
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
	Protection
	// NoSkip renders every release on both sides, even those whose input
	// fingerprints are equal, and reads nothing from the render cache.
	NoSkip bool `json:"noSkip,omitempty"`
	// NoCache neither reads nor writes the render cache (OPM_CACHE_DIR/renders).
	NoCache bool `json:"noCache,omitempty"`
	// CacheDir, when set, is where this review keeps its caches (renders,
	// environments) instead of OPM_CACHE_DIR or the user cache directory:
	// the Dagger module restores it from a cache volume.
	CacheDir string `json:"-"`
	// CacheKey authenticates the render cache's entries: written with an
	// HMAC under it, read only when theirs verifies, so whoever can write
	// a shared cache without the key cannot make a review show a forged
	// render. Nil: OPM_CACHE_KEY; empty there too: unkeyed (a cache only
	// this user writes).
	CacheKey []byte `json:"-"`
	// Shard, when set, reviews only its part of the pairs (see Shard):
	// the part Split assigns it when set (see ReviewPlan.SplitInto), else
	// every Count-th pair.
	Shard *Shard       `json:"shard,omitempty"`
	Split *ReviewSplit `json:"split,omitempty"`
	// MaskKey, when set, keys the markers of masked Secret values for
	// this review (its commits and pairs): shards given the same key mask
	// equal values equally, so their merge compares them as one review
	// does. Nil: ReviewShard derives one from the context's seal key
	// (redact), and Review draws a random one.
	MaskKey []byte `json:"-"`
}

// UnchangedRelease is a release × environment a review did not render:
// its input fingerprints are equal on both sides, so are its renders.
type UnchangedRelease struct {
	Release     string `json:"release"`
	Environment string `json:"environment,omitempty"`
}

// Review compares two versions of a deployment directory without a
// cluster: every selected release × environment is rendered on both sides
// and, per release, objects are classified as added, modified (with a
// diff), unchanged or stale. Stale is the base's objects minus the head's
// after the component-rename check — what apply would prune if the base
// was what the cluster runs. A release that fails to render on one side
// gets Error and the others are still reviewed; Review itself fails only
// when neither side can be loaded or the selection names something that
// does not exist.
func Review(ctx context.Context, opts ReviewOptions) (*ChangeSet, error) {
	r, err := openReview(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.run(ctx)
}

// review is one review: its options, the two snapshots it compares, and
// how it runs where the public options say nothing (a shard's mask scope,
// the size of a chunk, stopping after the plan). Every entry point —
// Review, ReviewShard, PlanReview, and the check OPM_VERIFY_SKIPS asks
// for — opens one and runs it; none calls another.
type review struct {
	opts       ReviewOptions
	head, base *snapshot
	// repo and baseRef, for a base read from git: the repository and the
	// ref the base was resolved from.
	repo, baseRef string
	// scope names the review's commits for KeyedMasker.
	scope string
	// chunk overrides chunkReleases (tests).
	chunk int
	// planOnly stops the run after its plan (PlanReview).
	planOnly bool
	// masker masks Secret values, one key per run.
	masker *diff.Masker
}

// openReview finds the two snapshots of a review: the head's working
// tree, and the base's directory or, with BaseRefs, the merge base of the
// first ref that resolves and HEAD (read from git's objects, or checked
// out with NoSkip or when the objects cannot stand for a checkout).
func openReview(ctx context.Context, opts ReviewOptions) (*review, error) {
	r := &review{opts: opts, head: worktreeSnapshot(opts.renderOptions().Dir)}
	if len(opts.BaseRefs) == 0 {
		r.base = worktreeSnapshot(opts.BaseDir)
		return r, nil
	}
	dir, err := filepath.Abs(r.head.dir)
	if err != nil {
		return nil, fmt.Errorf("finding the deployment directory %s: %w", opts.Dir, err)
	}
	if r.repo, err = gitref.Root(ctx, dir); err != nil {
		return nil, fault.Wrap(fault.Validation, err)
	}
	ref, commit, err := resolveFirst(ctx, r.repo, opts.BaseRefs)
	if err != nil {
		return nil, err
	}
	mergeBase, err := gitref.MergeBase(ctx, r.repo, commit, "HEAD")
	if err != nil {
		return nil, err
	}
	if r.base, err = commitSnapshot(ctx, r.repo, dir, mergeBase, !opts.NoSkip, opts.cacheDir("environments")); err != nil {
		return nil, err
	}
	r.baseRef, r.scope = ref, "\x00"+mergeBase
	return r, nil
}

// close removes what the base's snapshot wrote.
func (r *review) close() { r.base.close() }

// run is the review's one plan: plan the pairs, look them up in the
// render cache, render the misses, compare, report.
func (r *review) run(ctx context.Context) (*ChangeSet, error) {
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
	cs := &ChangeSet{Operation: "review", Releases: []ReleaseChanges{}}
	// 1. Plan the pairs: those whose inputs are equal on both sides are
	// unchanged; of the rest, a shard takes its part.
	cs.Unchanged = identicalUnits(ctx, opts, head, base, envs, keys)
	cs.plan = planDigest(head, base, envs, keys)
	// One key for the whole output: equal Secret values mask equally, in
	// every shard of the review when they share MaskKey.
	r.masker = diff.KeyedMasker(opts.MaskKey, r.scope+"\x00"+cs.plan)
	if err := shardUnits(opts.Shard, opts.Split, cs.plan, head, base, envs, keys); err != nil {
		return nil, err
	}
	// 2. Look the rest up in the render cache, by fingerprint.
	cache := reviewCache(opts, scanned)
	lookUpRenders(ctx, opts, cache, head, base, envs, keys)
	cs.renders, cs.cachedRenders = countRenders(head, base, envs, keys)
	if r.planOnly {
		cs.estimate = estimateRenders(cache, head, base, envs, keys)
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
	for i, r := range results {
		if !r.ok {
			continue
		}
		r.rc.unit = i
		cs.Releases = append(cs.Releases, r.rc)
		cs.Counts.AddAll(r.rc.Counts)
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
func (r *review) relativeToRepo(cs *ChangeSet) {
	if r.repo == "" {
		return
	}
	cs.BaseRef, cs.BaseCommit = r.baseRef, r.base.commit
	prefixes := []string{r.repo + string(filepath.Separator), r.base.root + string(filepath.Separator)}
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

// 1. Plan the pairs: read both sides (parsed and fingerprinted when the
// syntax allows, loaded otherwise), choose the environments and releases,
// set apart the pairs whose inputs are equal on both sides, and (see
// review_shard.go) leave a shard its part.

// scanReviewSides parses both sides without evaluating them. ok is false
// when fingerprints cannot decide (NoSkip, syntax the scan cannot follow,
// a group or an unknown name asked for): then both sides are loaded as
// before.
func scanReviewSides(ctx context.Context, opts ReviewOptions, headSnap, baseSnap *snapshot) (head, base *reviewSide, ok bool) {
	if opts.NoSkip {
		return nil, nil, false
	}
	scan := func(name string, snap *snapshot, required bool) (*reviewSide, bool) {
		s := &reviewSide{name: name, snap: snap}
		if !required && snap.absent() {
			return s, true
		}
		t, err := snap.scan(ctx, opts.cacheDir("environments"))
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
func loadReviewSides(ctx context.Context, opts ReviewOptions, headSnap, baseSnap *snapshot) (head, base *reviewSide) {
	loadHead := func() { head = loadReviewSide(ctx, "head", headSnap, true) }
	loadBase := func() { base = loadReviewSide(ctx, "base", baseSnap, false) }
	if render.Workers(2, opts.Parallelism) < 2 {
		loadHead()
		loadBase()
		return head, base
	}
	var wg sync.WaitGroup
	wg.Go(loadBase)
	loadHead()
	wg.Wait()
	return head, base
}

// reviewSide is one loaded version of the deployment directory.
type reviewSide struct {
	name string
	snap *snapshot
	// present: the side exists (a missing base is an empty side).
	present  bool
	d        *load.Deployment // nil until loaded (a scanned side loads when first rendered)
	err      error            // loading failed; every release on this side errs
	releases []string
	envs     []string
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
	d, err := s.snap.load(ctx, s.pruned)
	if err != nil {
		s.err = fmt.Errorf("loading the %s: %w", s.name, err)
		return
	}
	s.d = d
}

// loadReviewSide evaluates a snapshot whole. A missing base directory, or
// one that is not a CUE module, is an empty side (the deployment is new),
// not an error.
func loadReviewSide(ctx context.Context, name string, snap *snapshot, required bool) *reviewSide {
	s := &reviewSide{name: name, snap: snap}
	if !required && snap.absent() {
		return s
	}
	s.present = true
	d, err := snap.load(ctx, nil)
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
	return s
}

// declares reports whether the side declares release key in env.
func (s *reviewSide) declares(key, env string) bool {
	return s.present && s.err == nil && slices.Contains(s.releases, key) && (env == "" || slices.Contains(s.envs, env))
}

func reviewEnvironments(opts ReviewOptions, head, base *reviewSide) ([]string, error) {
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

func reviewReleases(opts ReviewOptions, head, base *reviewSide) ([]string, error) {
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
func identicalUnits(ctx context.Context, opts ReviewOptions, head, base *reviewSide, envs, keys []string) []UnchangedRelease {
	if head.tree == nil || base.tree == nil {
		return nil
	}
	ro := opts.Selection.renderOptions()
	var out []UnchangedRelease
	head.identical = map[string]bool{}
	for _, env := range envs {
		for _, key := range keys {
			if !head.declares(key, env) || !base.declares(key, env) {
				continue
			}
			in := fingerprint.Inputs{Environment: env, ValuesFiles: ro.ValuesFiles, Values: ro.Values}
			h, herr := head.tree.Of(ctx, key, in)
			b, berr := base.tree.Of(ctx, key, in)
			if herr != nil || berr != nil || h != b {
				continue
			}
			head.identical[unitKey(env, key)] = true
			out = append(out, UnchangedRelease{Release: key, Environment: env})
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

// 2. Look the pairs up in the render cache, by fingerprint.

// reviewCache is the render cache a review reads and writes: none with
// NoCache or NoSkip, or when the sides could not be fingerprinted.
func reviewCache(opts ReviewOptions, scanned bool) *rendercache.Cache {
	if opts.NoCache || opts.NoSkip || !scanned {
		return nil
	}
	max, _ := strconv.ParseInt(os.Getenv(EnvCacheMaxBytes), 10, 64)
	key := opts.CacheKey
	if key == nil {
		key = []byte(os.Getenv(EnvCacheKey))
	}
	return rendercache.Open(opts.cacheDir("renders"), max, key)
}

// cacheDir is where the review keeps the cache named sub: under CacheDir
// when set, else where every opm command keeps it.
func (o ReviewOptions) cacheDir(sub string) string {
	if o.CacheDir != "" {
		return filepath.Join(o.CacheDir, sub)
	}
	return cacheDir(sub)
}

// EnvCacheMaxBytes bounds the render cache (bytes; default 1 GiB).
const EnvCacheMaxBytes = "OPM_CACHE_MAX_BYTES"

// EnvCacheKey authenticates the render cache's entries (a secret only
// trusted runs hold; see ReviewOptions.CacheKey).
const EnvCacheKey = "OPM_CACHE_KEY"

// lookUpRenders finds, for each unit reviewed here, each side's render
// in the cache by the unit's input fingerprint on that side. What is
// found is never rendered; what is not is stored once rendered.
func lookUpRenders(ctx context.Context, opts ReviewOptions, cache *rendercache.Cache, head, base *reviewSide, envs, keys []string) {
	if cache == nil {
		return
	}
	ro := opts.Selection.renderOptions()
	type unit struct {
		side     *reviewSide
		env, key string
		fp       string
		rel      *render.Release
	}
	var units []unit
	for _, side := range []*reviewSide{head, base} {
		if side.tree == nil {
			continue
		}
		side.cache, side.cached, side.fps = cache, map[string]*render.Release{}, map[string]string{}
		for _, env := range envs {
			for _, key := range keys {
				if worthReviewing(head, base, key, env) && side.declares(key, env) {
					units = append(units, unit{side: side, env: env, key: key})
				}
			}
		}
	}
	// Reading and verifying an entry (hash, decode, digest) is work
	// proportional to the pairs, done before anything renders: on every
	// core, as the renders are.
	eachOnWorkers(ctx, render.Workers(len(units), opts.Parallelism), len(units), func(i int) {
		u := &units[i]
		fp, err := u.side.tree.Of(ctx, u.key, fingerprint.Inputs{Environment: u.env, ValuesFiles: ro.ValuesFiles, Values: ro.Values})
		if err != nil {
			return
		}
		u.fp = fp
		if rel, _, ok := cache.Get(fp); ok {
			u.rel = rel
		}
	})
	for _, u := range units {
		if u.fp == "" {
			continue
		}
		k := unitKey(u.env, u.key)
		u.side.fps[k] = u.fp
		if u.rel != nil {
			u.side.cached[k] = u.rel
		}
	}
}

// countRenders counts the renders the pairs reviewed here need, one per
// side that declares the pair, and how many of them the render cache
// holds, as a remote cache reports its hits.
func countRenders(head, base *reviewSide, envs, keys []string) (renders, cached int) {
	for _, env := range envs {
		for _, key := range keys {
			if !worthReviewing(head, base, key, env) {
				continue
			}
			for _, side := range []*reviewSide{head, base} {
				if !side.declares(key, env) {
					continue
				}
				renders++
				if side.cached[unitKey(env, key)] != nil {
					cached++
				}
			}
		}
	}
	return renders, cached
}

// 3. Render the misses: evaluate each side only as far as they reach.

// renderAndCompare renders what the render cache does not hold of the
// pairs reviewed here and compares every pair; the results are in envs ×
// keys order. Sides that were not scanned are loaded whole, and every
// core shares their renders (reviewAll). Scanned sides are evaluated
// pruned to the releases rendered: evaluating a release inside a root of
// a thousand costs three times what it does inside a root of a hundred.
// Up to chunkReleases of them are one chunk whose renders every core
// shares; more are chunks, one per core at a time (reviewChunks), which
// also return the fleet they read (the head's, else the base's, as
// reviewFleet reads it from sides evaluated whole).
func (r *review) renderAndCompare(ctx context.Context, scanned bool, head, base *reviewSide, envs, keys []string) ([]reviewed, *fleet.Fleet, error) {
	if !scanned {
		out, err := r.reviewAll(ctx, head, base, envs, keys)
		return out, nil, err
	}
	rendered := releasesToRender(head, base, envs, keys)
	opts := r.opts
	size := cmp.Or(r.chunk, chunkReleases)
	if len(rendered) <= size {
		pruneSides(head, base, envs, keys, rendered)
		loadScannedSides(ctx, opts, head, base)
		out, err := r.reviewAll(ctx, head, base, envs, keys)
		return out, nil, err
	}
	chunks := splitChunks(rendered, size, render.Workers(len(rendered), opts.Parallelism))
	return r.reviewChunks(ctx, head, base, envs, keys, chunks)
}

// reviewChunks reviews many releases in chunks (indexes into keys), one
// chunk per core at a time: a goroutine takes a chunk, evaluates each
// side pruned to the chunk's releases, renders and compares their pairs,
// and takes the next. So no side is evaluated twice, only the chunks in
// progress are held in memory, and no goroutine waits for another before
// the last chunk. The pairs of the other releases, found in the render
// cache on both sides, are compared after.
func (r *review) reviewChunks(ctx context.Context, head, base *reviewSide, envs, keys []string, chunks [][]int) ([]reviewed, *fleet.Fleet, error) {
	out := make([]reviewed, len(envs)*len(keys))
	workers := render.Workers(len(chunks), r.opts.Parallelism)
	var mu sync.Mutex
	var fleets [2]*fleet.Fleet // as the head's and the base's chunks read them
	chunked := make([]bool, len(keys))
	for _, c := range chunks {
		for _, k := range c {
			chunked[k] = true
		}
	}
	eachOnWorkers(ctx, workers, len(chunks), func(c int) {
		h, b := head.forChunk(keys, chunks[c]), base.forChunk(nil, nil)
		pruneSides(h, b, envs, keys, chunks[c])
		for e, env := range envs {
			for _, k := range chunks[c] {
				if rc, ok := r.reviewRelease(ctx, h, b, keys[k], env); ok {
					out[e*len(keys)+k] = reviewed{rc: rc, ok: true}
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for i, side := range []*reviewSide{h, b} {
			if fleets[i] == nil {
				fleets[i] = declaredFleet(side.d)
			}
		}
	})
	var cached []int
	for i := range out {
		if env, key := envs[i/len(keys)], keys[i%len(keys)]; !chunked[i%len(keys)] && worthReviewing(head, base, key, env) {
			cached = append(cached, i)
		}
	}
	eachOnWorkers(ctx, workers, len(cached), func(j int) {
		i := cached[j]
		rc, ok := r.reviewRelease(ctx, head, base, keys[i%len(keys)], envs[i/len(keys)])
		out[i] = reviewed{rc: rc, ok: ok}
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return out, cmp.Or(fleets[0], fleets[1]), nil
}

// eachOnWorkers calls do for 0 … n-1 on workers goroutines, each taking
// the next index when done with one, until ctx ends.
func eachOnWorkers(ctx context.Context, workers, n int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				do(i)
			}
		})
	}
	wg.Wait()
}

// forChunk is a copy of a scanned side to evaluate afresh for one chunk
// of releases (indexes into keys); the head's copy knows the chunk, as
// worthReviewing asks it.
func (s *reviewSide) forChunk(keys []string, chunk []int) *reviewSide {
	c := s.copyToEvaluate()
	c.pruned, c.nothingToRender, c.chunk = nil, false, nil
	if chunk != nil {
		c.chunk = map[string]bool{}
		for _, k := range chunk {
			c.chunk[keys[k]] = true
		}
	}
	return c
}

// copyToEvaluate is a copy of a side that evaluates it afresh when it
// first renders (a loaded deployment's CUE values must not be evaluated
// concurrently); it knows what the side knows.
func (s *reviewSide) copyToEvaluate() *reviewSide {
	c := *s
	c.d, c.session = nil, nil
	return &c
}

// pruneSides limits each scanned side's evaluation to the releases
// (indexes into keys) that it renders: those with a pair reviewed here,
// neither identical nor found in the render cache, that it declares. A
// side with none is not evaluated at all.
func pruneSides(head, base *reviewSide, envs, keys []string, releases []int) {
	for _, side := range []*reviewSide{head, base} {
		if !side.present || side.tree == nil {
			continue
		}
		var rendered []string
		for _, k := range releases {
			if slices.ContainsFunc(envs, func(env string) bool {
				return worthReviewing(head, base, keys[k], env) && side.cached[unitKey(env, keys[k])] == nil && side.declares(keys[k], env)
			}) {
				rendered = append(rendered, keys[k])
			}
		}
		if len(rendered) == 0 {
			side.nothingToRender = true
			continue
		}
		side.pruned = side.snap.prunedTo(rendered)
	}
}

// loadScannedSides evaluates two scanned sides before a review renders
// them one at a time. With more than one render at once, reviewAll's
// first two workers evaluate their own sides as they start, at the same
// time as each other; when only one side has anything to render (the
// other is all in the render cache), the second worker evaluates its own
// copy of that side meanwhile, instead of after it.
func loadScannedSides(ctx context.Context, opts ReviewOptions, head, base *reviewSide) {
	if render.Workers(2, opts.Parallelism) < 2 {
		head.load(ctx)
		base.load(ctx)
	}
}

// reviewed is one release × environment of a review.
type reviewed struct {
	rc ReleaseChanges
	ok bool
}

// reviewAll reviews every environment × release, environments outermost;
// the results are in that order whichever finishes first.
//
// One render at a time, each release is rendered on both sides and
// compared. With more, the renders run first, one goroutine per core, and
// each side's renders are a queue of their own: a goroutine works through
// its home side's queue (the first two use the head and the base already
// loaded, so two cores need no extra load) and then helps with the other,
// loading that side only when it first does. A loaded deployment's CUE
// values must not be evaluated concurrently, so no side is shared. The
// comparisons (plain Go, a tenth of the work: diffs of every modified
// object) follow on as many goroutines.
func (r *review) reviewAll(ctx context.Context, head, base *reviewSide, envs, keys []string) ([]reviewed, error) {
	n := len(envs) * len(keys)
	unit := func(i int) (env, key string) { return envs[i/len(keys)], keys[i%len(keys)] }
	out := make([]reviewed, n)
	workers := render.Workers(2*n, r.opts.Parallelism)
	if workers < 2 {
		for i := range n {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			env, key := unit(i)
			rc, ok := r.reviewRelease(ctx, head, base, key, env)
			out[i] = reviewed{rc: rc, ok: ok}
		}
		return out, nil
	}

	sides := [2]*reviewSide{head, base}
	renders := make([][2]sideRender, n)
	var next [2]atomic.Int64
	var wg sync.WaitGroup
	// Every goroutine's own copies are made before any starts: a side is
	// written as it loads and renders.
	owns := make([][2]*reviewSide, workers)
	for w := range owns {
		for s := range sides {
			if s == w {
				owns[w][s] = sides[s]
			} else {
				owns[w][s] = sides[s].copyToEvaluate()
			}
		}
	}
	for w, own := range owns {
		wg.Go(func() {
			if w < 2 {
				own[w].load(ctx) // see loadScannedSides
			}
			for _, s := range []int{w % 2, 1 - w%2} {
				for {
					i := int(next[s].Add(1) - 1)
					if i >= n || ctx.Err() != nil {
						break
					}
					env, key := unit(i)
					if !worthReviewing(head, base, key, env) {
						continue
					}
					if r, ok := sides[s].cached[unitKey(env, key)]; ok {
						renders[i][s] = sideRender{rel: r}
						continue
					}
					renders[i][s] = own[s].renderFor(ctx, key, env, r.opts.Selection)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	eachOnWorkers(ctx, workers, n, func(i int) {
		if env, key := unit(i); worthReviewing(head, base, key, env) {
			out[i] = reviewed{rc: r.compareRelease(key, env, renders[i][0], renders[i][1]), ok: true}
		}
	})
	return out, ctx.Err()
}

// renderOne renders one release of a side in one environment.
func (s *reviewSide) renderOne(ctx context.Context, key, env string, sel Selection) (*render.Release, error) {
	ro := sel.renderOptions()
	s.load(ctx)
	if s.err != nil {
		return nil, s.err
	}
	ro.Dir, ro.Environment, ro.Releases, ro.Namespace = s.d.Dir, env, []string{key}, ""
	// One session per loaded deployment (a scanned side loads one per
	// chunk): its renders share each environment's transformers.
	if s.session == nil || s.session.Deployment() != s.d {
		s.session = render.NewSession(s.d)
	}
	rels, err := s.session.Render(ctx, ro)
	if err != nil {
		return nil, err
	}
	if len(rels) != 1 {
		return nil, fmt.Errorf("rendering %s: got %d releases, want 1", key, len(rels))
	}
	return rels[0], nil
}

// sideRender is one side's render of a release in an environment: nil
// and no error when the side does not declare it there.
type sideRender struct {
	rel *render.Release
	err error
}

// renderFor renders release key in env on this side, if it declares it.
func (s *reviewSide) renderFor(ctx context.Context, key, env string, sel Selection) sideRender {
	switch {
	case s.err != nil:
		return sideRender{err: s.err}
	case !s.declares(key, env):
		return sideRender{}
	}
	if r, ok := s.cached[unitKey(env, key)]; ok {
		return sideRender{rel: r}
	}
	start := time.Now()
	r, err := s.renderOne(ctx, key, env, sel)
	if err != nil {
		return sideRender{err: fmt.Errorf("rendering the %s: %w", s.name, err)}
	}
	// A failed write costs the next run a render, nothing else.
	_ = s.cache.Put(s.fps[unitKey(env, key)], r, time.Since(start))
	return sideRender{rel: r}
}

// reviewRelease reviews one release in one environment; ok is false when
// there is nothing to report (see worthReviewing).
func (r *review) reviewRelease(ctx context.Context, head, base *reviewSide, key, env string) (rc ReleaseChanges, ok bool) {
	if !worthReviewing(head, base, key, env) {
		return rc, false
	}
	return r.compareRelease(key, env, head.renderFor(ctx, key, env, r.opts.Selection), base.renderFor(ctx, key, env, r.opts.Selection)), true
}

// 4. Compare.

// compareRelease builds the review of one release × environment from both
// sides' renders.
func (r *review) compareRelease(key, env string, head, base sideRender) ReleaseChanges {
	rc := ReleaseChanges{Name: key, key: key, Environment: env, Objects: []ObjectChange{}}
	headRel, baseRel := head.rel, base.rel
	var errs []error
	for _, e := range []error{head.err, base.err} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	for _, r := range []*render.Release{baseRel, headRel} { // head wins
		if r != nil {
			rc.Name, rc.Namespace, rc.ReleaseID = r.Name, r.Namespace, r.ReleaseID
		}
	}
	if len(errs) > 0 {
		rc.Error = errors.Join(errs...).Error()
		return rc
	}
	if headRel != nil {
		rc.Head = Revision{ManifestDigest: headRel.ManifestDigest, ChangeID: headRel.ChangeID}
		rc.Warnings = append(rc.Warnings, headRel.Warnings...)
		rc.Warnings = append(rc.Warnings, wouldRefuse(headRel)...)
		rc.Sensitive = headRel.Sensitive()
	}
	if baseRel != nil {
		rc.Base = &Revision{ManifestDigest: baseRel.ManifestDigest, ChangeID: baseRel.ChangeID}
		rc.Sensitive = rc.Sensitive || baseRel.Sensitive()
	}
	var headRes, baseRes []manifest.Resource
	if headRel != nil {
		headRes = headRel.Resources
	}
	if baseRel != nil {
		baseRes = baseRel.Resources
	}
	if headRel != nil {
		rc.Reach = reachOf(headRes)
	}
	if baseRel != nil {
		rc.BaseReach = reachOf(baseRes)
	}
	if rc.Reach != nil && rc.BaseReach != nil && !rc.Reach.Equal(rc.BaseReach) {
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("this change moves where release %s writes: %s → %s", key, rc.BaseReach, rc.Reach))
	}
	if err := r.compare(&rc, baseRes, headRes, secretFieldsOf(baseRel), secretFieldsOf(headRel)); err != nil {
		rc.Error = err.Error()
		rc.Objects = []ObjectChange{}
		rc.Counts = Counts{}
		return rc
	}
	if w := unmovedChange(baseRel, headRel, rc.Counts, env); w != "" {
		rc.Warnings = append(rc.Warnings, w)
	}
	switch {
	case headRel == nil && baseRel != nil:
		rc.Warnings = append(rc.Warnings, fmt.Sprintf(
			"release %s is not declared in the head for this environment: the %d objects it rendered in the base are stale, and apply does not touch releases it no longer renders; remove them with `opm delete --name %s -n %s`",
			key, len(baseRes), baseRel.Name, baseRel.Namespace))
	case headRel != nil && len(headRes) == 0 && len(baseRes) > 0:
		rc.Warnings = append(rc.Warnings, fmt.Sprintf(
			"the head renders no objects for release %s: applying it would prune all %d objects the base rendered, so apply refuses without --force", key, len(baseRes)))
	}
	for _, r := range []*render.Release{headRel, baseRel} {
		if r != nil {
			rc.redact(r.Secrets)
		}
	}
	return rc
}

// compare classifies head objects against base objects by
// Kubernetes identity, then adds the stale set in delete order.
func (r *review) compare(rc *ReleaseChanges, baseRes, headRes []manifest.Resource, baseFields, headFields map[manifest.ID][]taint.Field) error {
	baseByID := make(map[manifest.ID]manifest.Resource, len(baseRes))
	for _, res := range baseRes {
		baseByID[res.ID()] = res
	}
	for _, res := range headRes {
		oc := ObjectChange{Object: reviewRef(inventory.EntryOf(res))}
		before := baseByID[res.ID()].Object // nil when the base lacks it
		text, err := diff.Unified(before, res.Object, reviewDiffOptions(res.ID(), r.masker.ForObject(headFields[res.ID()], baseFields[res.ID()])))
		if err != nil {
			return err
		}
		switch {
		case before == nil:
			oc.Change = Added
		case text == "":
			oc.Change = Unchanged
		default:
			oc.Change = Modified
		}
		oc.Diff = text
		rc.Objects = append(rc.Objects, oc)
		rc.Counts.Add(oc.Change)
	}
	for _, e := range inventory.Stale(inventory.Entries(baseRes), inventory.Entries(headRes)) {
		oc := ObjectChange{Object: reviewRef(e), Change: Stale}
		text, err := diff.Unified(baseByID[e.ID()].Object, nil, reviewDiffOptions(e.ID(), r.masker.ForObject(baseFields[e.ID()])))
		if err != nil {
			return err
		}
		oc.Diff = text
		if w, relWarn := r.opts.Protection.warnings(e); w != "" {
			oc.Warning = w
			rc.Warnings = append(rc.Warnings, relWarn)
		}
		rc.Objects = append(rc.Objects, oc)
		rc.Counts.Add(Stale)
	}
	return nil
}

// secretFieldsOf maps each object of rel to the fields a secret reaches.
func secretFieldsOf(rel *render.Release) map[manifest.ID][]taint.Field {
	if rel == nil || len(rel.SecretFields) == 0 {
		return nil
	}
	out := make(map[manifest.ID][]taint.Field, len(rel.Resources))
	for i, r := range rel.Resources {
		if i < len(rel.SecretFields) && len(rel.SecretFields[i]) > 0 {
			out[r.ID()] = rel.SecretFields[i]
		}
	}
	return out
}

func reviewDiffOptions(id manifest.ID, m *diff.Masker) diff.Options {
	return diff.Options{FromFile: "base/" + id.String(), ToFile: "head/" + id.String(), Masker: m}
}

func reviewRef(e inventory.Entry) ObjectRef {
	return ObjectRef{Group: e.Group, Version: e.V, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, Component: e.Component}
}

// 5. Report: in rollout order, verified against the full path on request.

// reviewFleet is the fleet the head (else the base) declares. When the
// renders came from the cache and neither side was evaluated, the head's
// environments alone are, so a review reads in rollout order whether its
// renders were cached or not.
func reviewFleet(ctx context.Context, head, base *reviewSide) *fleet.Fleet {
	if f := cmp.Or(declaredFleet(head.d), declaredFleet(base.d)); f != nil {
		return f
	}
	if !head.present || head.err != nil || !head.nothingToRender {
		return nil
	}
	d, err := head.snap.load(ctx, head.snap.environmentsOnly())
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
func groupByWave(cs *ChangeSet, f *fleet.Fleet) {
	for i, rc := range cs.Releases {
		if e, ok := f.Lookup(rc.Environment); ok {
			cs.Releases[i].Group, cs.Releases[i].Wave = e.Group, e.Wave
		}
	}
	orderByWave(cs)
}

// orderByWave orders releases by wave, group and environment when any
// has a group or a wave; otherwise they stay in plan order.
func orderByWave(cs *ChangeSet) {
	if !slices.ContainsFunc(cs.Releases, func(rc ReleaseChanges) bool { return rc.Group != "" || rc.Wave != 0 }) {
		return
	}
	slices.SortStableFunc(cs.Releases, func(a, b ReleaseChanges) int {
		return cmp.Or(cmp.Compare(a.Wave, b.Wave), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Environment, b.Environment))
	})
}

// verifyUnchanged, with OPM_VERIFY_SKIPS set, reviews again rendering
// every pair and fails loudly when a pair the fingerprints called
// unchanged renders differently on the two sides.
func (r *review) verifyUnchanged(ctx context.Context, cs *ChangeSet) error {
	if os.Getenv(EnvVerifySkips) == "" || r.opts.NoSkip || len(cs.Unchanged) == 0 {
		return nil
	}
	// The same snapshots, every pair rendered, not a shard's: every shard
	// lists the same unchanged pairs, and a split names the pairs of the
	// review that skips.
	all := &review{opts: r.opts, head: r.head, base: r.base, scope: r.scope}
	all.opts.NoSkip, all.opts.Shard, all.opts.Split = true, nil, nil
	full, err := all.run(ctx)
	if err != nil {
		return fmt.Errorf("%s: reviewing every pair: %w", EnvVerifySkips, err)
	}
	for _, u := range cs.Unchanged {
		for _, r := range full.Releases {
			if r.key != u.Release || r.Environment != u.Environment {
				continue
			}
			if r.Error != "" || r.Counts.Changed() {
				return fmt.Errorf("%s: release %s (environment %q) was skipped as unchanged (inputs identical on both sides), but rendering both sides shows %s: "+
					"the skip was wrong. This is a bug in opm; --no-skip renders regardless", EnvVerifySkips, u.Release, u.Environment, cmp.Or(r.Error, "changes"))
			}
		}
	}
	return nil
}

// Declared are the names a deployment directory declares, each sorted:
// what shell completion offers for --env, --group and --release.
type Declared struct {
	Environments, Groups, Releases []string
}

// DeclaredNames reads the names the deployment directory dir declares,
// with one load and no render.
func DeclaredNames(ctx context.Context, dir string) (*Declared, error) {
	d, err := load.Load(ctx, cmp.Or(dir, "."))
	if err != nil {
		return nil, err
	}
	out := &Declared{}
	envs := d.Root.LookupPath(cue.ParsePath("environments"))
	if out.Environments, err = load.FieldNames(envs); err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the environments of %s:\n%s", dir, load.Describe(err)))
	}
	for _, e := range out.Environments {
		if g, err := envs.LookupPath(cue.MakePath(cue.Str(e), cue.Str("group"))).String(); err == nil && g != "" && !slices.Contains(out.Groups, g) {
			out.Groups = append(out.Groups, g)
		}
	}
	slices.Sort(out.Groups)
	if out.Releases, err = load.FieldNames(d.Root.LookupPath(cue.ParsePath("releases"))); err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the releases of %s:\n%s", dir, load.Describe(err)))
	}
	return out, nil
}

// DeclaredEnvironments lists the environments the deployment directory
// dir declares, sorted; front doors use it to expand "all environments".
func DeclaredEnvironments(ctx context.Context, dir string) ([]string, error) {
	d, err := load.Load(ctx, cmp.Or(dir, "."))
	if err != nil {
		return nil, err
	}
	envs, err := load.FieldNames(d.Root.LookupPath(cue.ParsePath("environments")))
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the environments of %s:\n%s", dir, load.Describe(err)))
	}
	return envs, nil
}

// unmovedChange says why a pair whose change ID moves shows no object
// change: which values changed (paths only: the values shown elsewhere
// are masked, the paths never carry a secret), or the module's version.
// A reviewer otherwise reads "no changes" for a change apply will record.
func unmovedChange(base, head *render.Release, c Counts, env string) string {
	if base == nil || head == nil || base.ChangeID == head.ChangeID || c.Added+c.Modified+c.Stale > 0 {
		return ""
	}
	var before, after any
	if json.Unmarshal(base.Values, &before) != nil || json.Unmarshal(head.Values, &after) != nil {
		return ""
	}
	paths := changedPaths("values", before, after, nil)
	where := ""
	if env != "" {
		where = " in environment " + env
	}
	switch {
	case len(paths) > 0:
		if len(paths) > 8 {
			paths = append(paths[:8], fmt.Sprintf("and %d more", len(paths)-8))
		}
		return fmt.Sprintf("%s changed, but no object did: nothing release %s renders%s uses them, or they set what something else decides (replicas while an autoscaler scales the workload); apply records a new change and changes nothing on the cluster",
			strings.Join(paths, ", "), head.Name, where)
	case base.Module.Version != head.Module.Version:
		return fmt.Sprintf("the module's version changed (%s → %s), but no object did; apply records a new change and changes nothing on the cluster", base.Module.Version, head.Module.Version)
	}
	return ""
}

// changedPaths appends to out the dotted paths below prefix at which a and
// b differ, keys in sorted order.
func changedPaths(prefix string, a, b any, out []string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			out = append(out, prefix)
		}
		return out
	}
	keys := slices.Sorted(maps.Keys(am))
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = changedPaths(prefix+"."+k, am[k], bm[k], out)
	}
	return out
}
