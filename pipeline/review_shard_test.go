package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/rendercache"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// shardRepo is a git repository of a fleet of n releases in three
// environments (groups and waves, so the review is reordered by wave),
// each holding a Secret (so never cached), a base commit on main and a
// head commit on branch feature that changes what every release reads.
func shardRepo(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`environments: dev: {namespace: "dev"}
environments: qa: {namespace: "qa", group: "pre", rollout: after: ["dev"]}
environments: prod: {namespace: "prod", group: "production", rollout: after: ["qa"]}
shared: stamp: "one"
`)
	for i := range n {
		fmt.Fprintf(&b, "releases: r%02d: {#module: appmodule, values: {stamp: shared.stamp + \"-%d\", secret: \"s3cret-value-%02d\"}}\n", i, i, i)
	}
	return pullRequest(t, deploytest.HealthyDir(t, b.String()), `shared: stamp: "one"`, `shared: stamp: "two"`)
}

// pullRequest makes dir a git repository: its files committed on main,
// then on branch feature (checked out) one commit that replaces old with
// new in deploy.cue.
func pullRequest(t *testing.T, dir, old, new string) string {
	t.Helper()
	return pullRequestOf(t, dir, "deploy.cue", old, new)
}

// pullRequestOf is pullRequest replacing old with new in file.
func pullRequestOf(t *testing.T, dir, file, old, new string) string {
	t.Helper()
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "base")
	gitRun(t, dir, "checkout", "-q", "-b", "feature")
	setFile(t, filepath.Join(dir, file), old, new)
	gitRun(t, dir, "commit", "-qam", "the pull request")
	return dir
}

// partialOf is shard i of n of the review o, as CI passes it on.
func partialOf(t *testing.T, o pipeline.ReviewOptions, i, n int) *pipeline.PartialReview {
	t.Helper()
	o.Shard = &pipeline.Shard{Index: i, Count: n}
	p, err := pipeline.ReviewShard(t.Context(), o)
	assert.NilError(t, err)
	// As a CI artifact: written and read back.
	b, err := json.Marshal(p)
	assert.NilError(t, err)
	var back pipeline.PartialReview
	assert.NilError(t, json.Unmarshal(b, &back))
	return &back
}

// The shards of a review, merged, are the review: the same JSON, byte
// for byte, in the same (wave) order, whichever order the partials come
// in; each shard renders only its part. Partials that do not belong
// together are refused.
func TestShardsMergeIntoTheReview(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	dir := shardRepo(t, 7)
	noCache := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoCache: true}
	whole, err := pipeline.Review(t.Context(), noCache)
	assert.NilError(t, err)
	assert.Equal(t, len(whole.Releases), 21)
	want, err := json.MarshalIndent(whole, "", "  ")
	assert.NilError(t, err)
	// Rendered two releases at a time (each side evaluated pruned to the
	// chunk), the review is the same.
	chunked := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoCache: true}
	inChunks, err := pipeline.ReviewInChunks(t.Context(), chunked, 2)
	assert.NilError(t, err)
	got, err := json.MarshalIndent(inChunks, "", "  ")
	assert.NilError(t, err)
	assert.Equal(t, string(got), string(want))

	parts := []*pipeline.PartialReview{partialOf(t, noCache, 3, 3), partialOf(t, noCache, 1, 3), partialOf(t, noCache, 2, 3)}
	for _, p := range parts {
		assert.Equal(t, len(p.ChangeSet.Releases), 7, "shard %s reviews a third", p.Shard)
	}
	merged, err := pipeline.MergeReviews(parts)
	assert.NilError(t, err)
	got, err = json.MarshalIndent(merged, "", "  ")
	assert.NilError(t, err)
	assert.Equal(t, string(got), string(want))

	for name, c := range map[string]struct {
		parts []*pipeline.PartialReview
		want  string
	}{
		"missing":   {parts[:2], "shard 2/3 is missing"},
		"twice":     {[]*pipeline.PartialReview{parts[0], parts[1], parts[2], parts[1]}, "shard 1/3 is given twice"},
		"count":     {[]*pipeline.PartialReview{parts[0], partialOf(t, noCache, 1, 2)}, "split the review differently (3 and 2 shards)"},
		"not-parts": {[]*pipeline.PartialReview{{Format: "something else"}}, "is not a partial review"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pipeline.MergeReviews(c.parts)
			assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
			assert.ErrorContains(t, err, c.want)
		})
	}
	// Another head commit: the partials are of another review.
	setValues(t, dir, `shared: stamp: "two"`, `shared: stamp: "three"`)
	gitRun(t, dir, "commit", "-qam", "moved on")
	_, err = pipeline.MergeReviews([]*pipeline.PartialReview{parts[0], parts[1], partialOf(t, noCache, 2, 3)})
	assert.ErrorContains(t, err, "merge the shards of one review")

	// Uncommitted changes cannot be sharded: other runners cannot see them.
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "extra.cue"), []byte("package deploy\n"), 0o644))
	_, err = pipeline.ReviewShard(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, Shard: &pipeline.Shard{Index: 1, Count: 2}})
	assert.ErrorContains(t, err, "uncommitted changes")
}

// The base side of a review is what main rendered: with the cache warm
// from main's own review, the base is read, not evaluated, and the result
// is the same.
func TestWarmCacheReviewsTheSame(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	dir := deploytest.Dir(t, "team-a", `withSecret: false`)
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "base")
	gitRun(t, dir, "checkout", "-q", "-b", "feature")
	p := filepath.Join(dir, "deploy.cue")
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(p, append(b, []byte("\nreleases: app: values: replicas: 3\n")...), 0o644))
	gitRun(t, dir, "commit", "-qam", "scale")

	opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}}
	cold, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	assert.Assert(t, cold.Counts.Changed())
	entries := func() int { return pipeline.CachedRenders(os.Getenv("OPM_CACHE_DIR")) }
	assert.Equal(t, entries(), 2, "both sides' renders are cached")
	warm, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	cj, _ := json.Marshal(cold)
	wj, _ := json.Marshal(warm)
	assert.Equal(t, string(wj), string(cj))
	noCache := opts
	noCache.NoCache = true
	fresh, err := pipeline.Review(t.Context(), noCache)
	assert.NilError(t, err)
	fj, _ := json.Marshal(fresh)
	assert.Equal(t, string(fj), string(cj))
	// The hits are reported: none cold, both sides warm, none without
	// the cache.
	for name, c := range map[string]struct {
		cs             *pipeline.ChangeSet
		renders, cache int
	}{"cold": {cold, 2, 0}, "warm": {warm, 2, 2}, "no-cache": {fresh, 2, 0}} {
		renders, cached := c.cs.RenderCounts()
		assert.Check(t, renders == c.renders && cached == c.cache, "%s: %d renders, %d cached; want %d, %d", name, renders, cached, c.renders, c.cache)
	}
}

// A review of more releases than one chunk evaluates, after a push that
// changes some of them, renders those in chunks and still reports the
// pairs it found in the render cache on both sides (the first push's
// change), in rollout order: the same JSON as the review that reads no
// cache in one chunk, one render at a time or one chunk per core.
func TestChunkedReviewKeepsCachedPairs(t *testing.T) {
	dir := modulesRepo(t, 5)
	firstPush := t.TempDir()
	opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, MaskKey: []byte("one key"), CacheDir: firstPush}
	_, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	for _, m := range []string{"m0", "m1", "m3"} {
		setFile(t, filepath.Join(dir, "mods", m, m+".cue"), `own: "a"`, `own: "b"`)
	}
	gitRun(t, dir, "commit", "-qam", "three modules")

	noCache := opts
	noCache.NoCache = true
	whole, err := pipeline.Review(t.Context(), noCache)
	assert.NilError(t, err)
	assert.Equal(t, len(whole.Releases), 10)
	want, _ := json.MarshalIndent(whole, "", "  ")
	for _, parallelism := range []int{1, 0} {
		chunked := opts
		chunked.Parallelism, chunked.CacheDir = parallelism, filepath.Join(t.TempDir(), "cache")
		assert.NilError(t, os.CopyFS(chunked.CacheDir, os.DirFS(firstPush)))
		warm, err := pipeline.ReviewInChunks(t.Context(), chunked, 1)
		assert.NilError(t, err)
		renders, cached := warm.RenderCounts()
		assert.Check(t, renders == 20 && cached == 14, "parallelism %d: %d renders, %d cached; want 20, 14 (three releases' heads rendered)", parallelism, renders, cached)
		got, _ := json.MarshalIndent(warm, "", "  ")
		assert.Equal(t, string(got), string(want), "parallelism %d", parallelism)
	}
}

// modulesRepo is a git repository of n releases r0… in environments dev
// and prod (rolled out after dev), release ri of module package mods/mi,
// every module reading package lib; on branch feature, lib changes.
func modulesRepo(t *testing.T, n int) string {
	t.Helper()
	files := map[string]string{"lib/lib.cue": "package lib\n\nstamp: \"one\"\n"}
	var root strings.Builder
	root.WriteString("package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n")
	for m := range n {
		fmt.Fprintf(&root, "\tm%dmod \"test.example/deploy/mods/m%d\"\n", m, m)
		files[fmt.Sprintf("mods/m%d/m%d.cue", m, m)] = fmt.Sprintf(`package m%[1]d

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	"test.example/deploy/lib"
)

core.#Module
metadata: {apiVersion: "test.example/deploy/m%[1]d@v0", name: "m%[1]d", version: "1.0.0"}
#config: {}
#components: c: {
	core.#Configs
	spec: configs: "c%[1]d": data: {stamp: lib.stamp, own: "a"}
}
`, m)
	}
	root.WriteString(")\n\nenvironments: [Name=string]: core.#Environment & {metadata: name: Name}\n" +
		"releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" +
		"environments: dev: namespace: \"dev\"\nenvironments: prod: {namespace: \"prod\", rollout: after: [\"dev\"]}\n")
	for m := range n {
		fmt.Fprintf(&root, "releases: r%d: #module: m%dmod\n", m, m)
	}
	files["deploy.cue"] = root.String()
	return pullRequestOf(t, deploytest.Write(t, files), "lib/lib.cue", `stamp: "one"`, `stamp: "two"`)
}

// A review given CacheDir (as the Dagger module gives the directory it
// restored from its cache volume) keeps every cache there and nothing
// under OPM_CACHE_DIR, reads it back on the next run, and does not see
// another directory's entries.
func TestReviewKeepsItsCachesInCacheDir(t *testing.T) {
	global := t.TempDir()
	t.Setenv("OPM_CACHE_DIR", global)
	dir := cacheableRepo(t, 2)
	own := t.TempDir()
	opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, CacheDir: own}
	first, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	renders, cached := first.RenderCounts()
	assert.Equal(t, renders, 8, "2 releases × 2 environments × 2 sides")
	assert.Equal(t, cached, 0)
	files := func(root string) (n int) {
		_ = filepath.WalkDir(root, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	assert.Equal(t, pipeline.CachedRenders(own), 8)
	assert.Equal(t, files(global), 0, "nothing is cached outside CacheDir")

	again, err := pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	_, cached = again.RenderCounts()
	assert.Equal(t, cached, 8, "the second review reads every render from CacheDir")
	other := opts
	other.CacheDir = t.TempDir()
	elsewhere, err := pipeline.Review(t.Context(), other)
	assert.NilError(t, err)
	_, cached = elsewhere.RenderCounts()
	assert.Equal(t, cached, 0)
	aj, _ := json.Marshal(again)
	ej, _ := json.Marshal(elsewhere)
	assert.Equal(t, string(aj), string(ej))
}

// Reviews that share one render cache at the same time, while it is
// trimmed to almost nothing under them, all give the review a cacheless
// run gives: an entry is whole or absent, never half, and a miss only
// costs a render.
func TestConcurrentReviewsShareTheCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("OPM_CACHE_DIR", cache)
	t.Setenv(pipeline.EnvCacheMaxBytes, "4096") // about one entry: every review trims
	dir := cacheableRepo(t, 4)
	want, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoCache: true})
	assert.NilError(t, err)
	wantJSON, _ := json.Marshal(want)
	const runs = 6
	got := make([][]byte, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}})
			errs[i] = err
			got[i], _ = json.Marshal(cs)
		})
	}
	wg.Wait()
	for i := range runs {
		assert.NilError(t, errs[i])
		assert.Equal(t, string(got[i]), string(wantJSON), "run %d", i)
	}
	assert.Equal(t, len(want.Releases), 8)
	assert.Assert(t, want.Counts.Modified > 0)
	// The cache was used: entries exist (trimmed down to its bound), and
	// nothing half-written is left behind.
	entries := 0
	assert.NilError(t, filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		assert.Check(t, !strings.HasPrefix(d.Name(), ".tmp-"), "a temporary file is left: %s", p)
		if err == nil && !d.IsDir() {
			entries++
		}
		return err
	}))
	assert.Assert(t, entries > 0, "no render was cached")
}

// cacheableRepo is a git repository of n releases without secret data
// (so their renders are cached) in environments dev and prod, a base
// commit on main and a head commit on branch feature that changes what
// every release reads.
func cacheableRepo(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n\tappmodule \"test.example/deploy/app\"\n)\n\n" +
		"environments: [Name=string]: core.#Environment & {metadata: name: Name}\nreleases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" +
		"environments: dev: namespace: \"dev\"\nenvironments: prod: namespace: \"prod\"\nshared: replicas: 1\n")
	for i := range n {
		fmt.Fprintf(&b, "releases: r%d: {#module: appmodule, values: {withSecret: false, replicas: shared.replicas}}\n", i)
	}
	return pullRequest(t, deploytest.Write(t, map[string]string{"deploy.cue": b.String()}), `shared: replicas: 1`, `shared: replicas: 2`)
}

// A split planned from the render cache's recorded costs gives a costly
// pair a shard of its own, where dealing by count gives every shard the
// same number of pairs; merged, either is the review. Shards given the
// split of another review, another shard count, or splitting otherwise
// than the others are refused.
func TestPlannedSplitBalancesByRecordedCost(t *testing.T) {
	cacheDir := t.TempDir()
	t.Setenv("OPM_CACHE_DIR", cacheDir)
	dir := cacheableRepo(t, 6)
	opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}}
	// Main's renders are cached (as its own run left them), r3 in prod
	// recorded as costing ten seconds.
	gitRun(t, dir, "checkout", "-q", "main")
	ex, err := pipeline.Explain(t.Context(), pipeline.Selection{Dir: dir, Environment: "prod", Releases: []string{"r3"}})
	assert.NilError(t, err)
	gitRun(t, dir, "checkout", "-q", "feature")
	_, err = pipeline.Review(t.Context(), opts)
	assert.NilError(t, err)
	cache := rendercache.Open(cacheDir, 0, nil)
	rel, _, ok := cache.Get(ex[0].Fingerprint)
	assert.Assert(t, ok, "main's r3 in prod is cached")
	assert.NilError(t, cache.Put(ex[0].Fingerprint, rel, 10*time.Second))
	// The pull request moves on: its head is not cached, main is.
	setValues(t, dir, `shared: replicas: 2`, `shared: replicas: 3`)
	gitRun(t, dir, "commit", "-qam", "again")

	whole, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, NoCache: true})
	assert.NilError(t, err)
	want, _ := json.MarshalIndent(whole, "", "  ")
	plan, err := pipeline.PlanReview(t.Context(), opts)
	assert.NilError(t, err)
	assert.Equal(t, plan.Pairs, 12)
	assert.Equal(t, plan.Cached, 12, "main's side of every pair")
	split := plan.SplitInto(3)
	assert.Assert(t, split.Seconds[0] >= 10 && split.Seconds[1] < 10 && split.Seconds[2] < 10, "%v", split.Seconds)
	// As the plan job's artifact: written and read back.
	b, err := json.Marshal(plan)
	assert.NilError(t, err)
	var back pipeline.ReviewPlan
	assert.NilError(t, json.Unmarshal(b, &back))

	shard := func(i, n int, split *pipeline.ReviewSplit) *pipeline.PartialReview {
		t.Helper()
		o := opts
		o.Split = split
		return partialOf(t, o, i, n)
	}
	var parts []*pipeline.PartialReview
	for i := 1; i <= 3; i++ {
		parts = append(parts, shard(i, 3, back.Split))
	}
	first := parts[0].ChangeSet.Releases
	assert.Equal(t, len(first), 1, "the costly pair has a shard of its own")
	assert.Equal(t, first[0].Name+"/"+first[0].Environment, "r3/prod")
	assert.Equal(t, len(parts[1].ChangeSet.Releases)+len(parts[2].ChangeSet.Releases), 11)
	merged, err := pipeline.MergeReviews(parts)
	assert.NilError(t, err)
	got, _ := json.MarshalIndent(merged, "", "  ")
	assert.Equal(t, string(got), string(want))

	// By count, every shard has four pairs.
	byCount := shard(1, 3, nil)
	assert.Equal(t, len(byCount.ChangeSet.Releases), 4)
	_, err = pipeline.MergeReviews([]*pipeline.PartialReview{byCount, parts[1], parts[2]})
	assert.ErrorContains(t, err, "split the pairs differently (by count and by the plan split-sha256:")

	o := opts
	o.Shard, o.Split = &pipeline.Shard{Index: 1, Count: 2}, back.Split
	_, err = pipeline.ReviewShard(t.Context(), o)
	assert.ErrorContains(t, err, "splits the review into 3 shards, not 2")
	// A split names pairs, not commits: one planned before a push that
	// leaves the pairs as they were still gives each to one shard.
	setValues(t, dir, `shared: replicas: 3`, `shared: replicas: 4`)
	gitRun(t, dir, "commit", "-qam", "once more")
	o.Shard = &pipeline.Shard{Index: 1, Count: 3}
	p, err := pipeline.ReviewShard(t.Context(), o)
	assert.NilError(t, err)
	assert.Equal(t, len(p.ChangeSet.Releases), 1)
	// A push that adds a pair makes it a split of another review.
	setValues(t, dir, `shared: replicas: 4`, "shared: replicas: 4\nreleases: r6: {#module: appmodule, values: withSecret: false}")
	gitRun(t, dir, "commit", "-qam", "r6 comes")
	_, err = pipeline.ReviewShard(t.Context(), o)
	assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
	assert.ErrorContains(t, err, "made for another review")
}

// Shards given one seal key (the CI secret every runner has) mask alike,
// so their merge shows a rotated secret as one review does: two markers
// per release and environment, the old value's and the new one's, the
// same whichever run of the shards made them; equal values of different
// releases get unrelated markers (a marker links nothing but one place);
// the values themselves never show. Without a seal key the shards'
// markers are unrelated to the keyed ones; another review (another head
// commit) gets other markers for the same values.
func TestShardsMaskSecretsAlike(t *testing.T) {
	t.Setenv("OPM_CACHE_DIR", t.TempDir())
	var b strings.Builder
	b.WriteString(`environments: dev: {namespace: "dev"}
environments: prod: {namespace: "prod"}
shared: secret: "first-canary-value"
`)
	for i := range 4 {
		fmt.Fprintf(&b, "releases: r%d: {#module: appmodule, values: secret: shared.secret}\n", i)
	}
	dir := pullRequest(t, deploytest.HealthyDir(t, b.String()), `shared: secret: "first-canary-value"`, `shared: secret: "second-canary-value"`)

	marker := regexp.MustCompile(regexp.QuoteMeta(diff.MaskPrefix) + `[0-9a-f]{12}\)`)
	merged := func(ctx context.Context) (text string, markers map[string]bool) {
		t.Helper()
		var parts []*pipeline.PartialReview
		for i := 1; i <= 2; i++ {
			p, err := pipeline.ReviewShard(ctx, pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: dir}, BaseRefs: []string{"main"}, Shard: &pipeline.Shard{Index: i, Count: 2}})
			assert.NilError(t, err)
			parts = append(parts, p)
		}
		cs, err := pipeline.MergeReviews(parts)
		assert.NilError(t, err)
		assert.Equal(t, len(cs.Releases), 8)
		for _, rc := range cs.Releases {
			assert.Equal(t, rc.Error, "", "%s/%s", rc.Name, rc.Environment)
		}
		j, err := json.Marshal(cs)
		assert.NilError(t, err)
		markers = map[string]bool{}
		for _, m := range marker.FindAllString(string(j), -1) {
			markers[m] = true
		}
		return string(j), markers
	}
	sealed := redact.With(t.Context(), redact.New(manifest.NewSealer([]byte("the repository's seal key"))))
	text, alike := merged(sealed)
	assert.Assert(t, !strings.Contains(text, "canary-value"), "a secret value shows")
	assert.Equal(t, len(alike), 16, "old and new value of 4 releases in 2 environments, each its own: %v", alike)
	_, again := merged(sealed)
	assert.DeepEqual(t, again, alike)

	_, unkeyed := merged(t.Context())
	assert.Equal(t, len(unkeyed), 16, "%v", unkeyed)
	for m := range unkeyed {
		assert.Assert(t, !alike[m], "an unkeyed shard links to the keyed review's marker %s", m)
	}

	setValues(t, dir, `environments: dev: {namespace: "dev"}`, `environments: dev: {namespace: "dev-moved"}`)
	gitRun(t, dir, "commit", "-qam", "another review")
	_, other := merged(sealed)
	assert.Equal(t, len(other), 16, "%v", other)
	for m := range other {
		assert.Assert(t, !alike[m], "another review links to this one's marker %s", m)
	}
}

// Every front door merges the shards' files with MergeReviewFiles: a
// file missing is not-found, one that is no partial review says what
// writes them, each naming the file.
func TestMergeReviewFilesNamesTheFileAndTheFix(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "summary.json")
	assert.NilError(t, os.WriteFile(bad, []byte("# not json"), 0o644))
	_, err := pipeline.MergeReviewFiles(bad)
	assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
	assert.Check(t, is.Contains(err.Error(), bad))
	assert.Check(t, is.Contains(err.Error(), "opm review --shard -o json writes them"))
	_, err = pipeline.MergeReviewFiles(filepath.Join(dir, "missing.json"))
	assert.Equal(t, fault.KindOf(err), fault.NotFound, "%v", err)
}
