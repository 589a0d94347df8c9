// The opm Dagger module: render, review, diff, apply, prune, inspect and
// delete OPM releases from any Dagger pipeline.
//
// Every function is a thin adapter over the github.com/opmodel/pipeline
// package, the same one the opm CLI and the GitHub Action call: it copies
// the source directory and values files into the module's container, reads
// the kubeconfig secret into memory (never onto disk, never into a log),
// calls one pipeline operation and maps its result to fields. All logic and
// its tests live in pipeline.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"dagger/opm/internal/dagger"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// Opm holds what every function needs: the deployment directory and, for
// the functions that reach a cluster, a kubeconfig and context.
type Opm struct {
	// Source holds the deployment directory (a CUE module).
	Source *dagger.Directory
	// Path is the deployment directory inside Source.
	Path string
	// +private
	Kubeconfig *dagger.Secret
	// +private
	Cluster *dagger.Service
	// Context overrides every environment's kubeContext.
	Context string
	// +private
	ValuesSecret *dagger.Secret
	// +private
	SopsAgeKey *dagger.Secret
	// +private
	SealKey *dagger.Secret
	// +private
	CacheKey *dagger.Secret
}

func New(
	// The repository or directory holding the deployment directory.
	// +defaultPath="/"
	// +ignore=[".git", "bin", "**/node_modules"]
	source *dagger.Directory,
	// The deployment directory inside source.
	// +optional
	// +default="."
	path string,
	// A kubeconfig, e.g. file://$HOME/.kube/config or env://KUBECONFIG_DATA.
	// An environment's kubeContext is selected inside it, never replaced.
	// +optional
	kubeconfig *dagger.Secret,
	// A context overriding every environment's kubeContext.
	// +optional
	context string,
	// The API server as a service, for a cluster on the caller's machine
	// (kind, minikube, Docker Desktop) whose kubeconfig names 127.0.0.1,
	// e.g. tcp://localhost:6443. The kubeconfig's cluster with that port is
	// pointed at it, TLS server name kept.
	// +optional
	cluster *dagger.Service,
	// A values file held in a secret (YAML or JSON, plaintext or
	// SOPS-encrypted), e.g. env://PROD_VALUES, merged last into the one
	// selected release. Read into memory only; its values are masked
	// wherever values are shown.
	// +optional
	valuesSecret *dagger.Secret,
	// An age secret key that opens SOPS-encrypted values files (the
	// environments' valuesFiles and valuesSecret), e.g. env://SOPS_AGE_KEY.
	// +optional
	sopsAgeKey *dagger.Secret,
	// A key that seals the digests and change IDs of releases holding
	// secret data, and names that carry a secret, in everything a function
	// returns, so they stay comparable across runs; without it, a random
	// key per call seals them.
	// +optional
	sealKey *dagger.Secret,
	// A key that authenticates the render cache volume's entries, e.g.
	// env://OPM_CACHE_KEY: written with an HMAC under it and read only when
	// theirs verifies, so whoever can write the volume without it cannot
	// make a review show a forged render. Give it to trusted calls only;
	// without it the cache is unkeyed (docs/review-at-scale.md).
	// +optional
	cacheKey *dagger.Secret,
) *Opm {
	return &Opm{Source: source, Path: path, Kubeconfig: kubeconfig, Context: context, Cluster: cluster,
		ValuesSecret: valuesSecret, SopsAgeKey: sopsAgeKey, SealKey: sealKey, CacheKey: cacheKey}
}

// Release is one rendered release.
type Release struct {
	Name        string
	Namespace   string
	Environment string
	ReleaseId   string
	ModuleId    string
	Digest      string
	ChangeId    string
}

// RenderResult is the result of Render.
type RenderResult struct {
	Releases []*Release
	// Digest is the manifest digest (combined over releases when several).
	Digest string
	// ChangeId is the change ID (combined over releases when several).
	ChangeId string
	// ReleaseId is set when one release was rendered.
	ReleaseId string
	// Json is `opm render -o json`.
	Json string
	// +private
	ManifestsYaml string
}

// Manifests is every release's manifests as one YAML stream in apply order.
func (r *RenderResult) Manifests() *dagger.File {
	return dag.File("manifests.yaml", r.ManifestsYaml)
}

// Render renders the releases of the deployment directory.
func (m *Opm) Render(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// Values files (CUE, JSON or YAML) merged last; need exactly one release.
	// +optional
	values []*dagger.File,
) (ret *RenderResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, err := m.selection(ctx, env, release, values)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Render(ctx, pipeline.RenderOptions{Selection: sel})
	if err != nil {
		return nil, err
	}
	// A returned File is content in the engine's cache: decrypted values
	// never go into one.
	res = res.WithoutSecretValues()
	y, err := res.YAML()
	if err != nil {
		return nil, err
	}
	for _, r := range res.Releases {
		if r.Sensitive {
			// The combined identifiers depend on the release's: as
			// recomputable, so sealed alike.
			redact.From(ctx).Sensitive(res.Digest(), res.ChangeID())
		}
	}
	out := &RenderResult{Digest: res.Digest(), ChangeId: res.ChangeID(), ReleaseId: res.ReleaseID(), Json: jsonOf(res), ManifestsYaml: string(y)}
	for _, r := range res.Releases {
		out.Releases = append(out.Releases, &Release{Name: r.Name, Namespace: r.Namespace, Environment: r.Environment,
			ReleaseId: r.ReleaseID, ModuleId: r.ModuleID, Digest: r.ManifestDigest, ChangeId: r.ChangeID})
	}
	return out, nil
}

// ChangesResult is the result of Diff and Review.
type ChangesResult struct {
	// HasChanges is true when anything would be added, modified or pruned.
	HasChanges bool
	// Stale lists what apply would prune ("release: kind/namespace/name").
	Stale []string
	// Markdown is the pull-request comment body; Text the terminal form.
	Markdown string
	Text     string
	Json     string
	// Renders is how many renders a review needed (a side of a pair it
	// reviewed) and CachedRenders how many of them it read from the
	// render cache this module keeps in a cache volume; both 0 for diff.
	Renders       int
	CachedRenders int
}

// changes is the result of Diff and Review; the Markdown, made to be
// published, shows releases holding secret data by sealed identifiers.
func (m *Opm) changes(ctx context.Context, cs *pipeline.ChangeSet) (*ChangesResult, error) {
	sealer := redact.From(ctx).Sealer()
	if sealer == nil {
		key, err := plaintext(ctx, m.SealKey)
		if err != nil {
			return nil, fmt.Errorf("reading sealKey: %w", err)
		}
		sealer = pipeline.NewSealer(key)
	}
	return &ChangesResult{HasChanges: cs.Counts.Changed(), Stale: cs.StaleObjects(),
		Markdown: report.Markdown(cs.Sealed(sealer), report.MarkdownOptions{}), Text: report.Text(cs, false), Json: jsonOf(cs)}, nil
}

// renderCacheKey is the cacheKey secret's bytes, nil without one (the
// review then falls back to OPM_CACHE_KEY, unset in the module).
func (m *Opm) renderCacheKey(ctx context.Context) ([]byte, error) {
	key, err := plaintext(ctx, m.CacheKey)
	if err != nil || key == "" {
		return nil, err
	}
	return []byte(key), nil
}

// plaintext reads an optional secret into memory ("" when not given).
func plaintext(ctx context.Context, s *dagger.Secret) (string, error) {
	if s == nil {
		return "", nil
	}
	return s.Plaintext(ctx)
}

// Review compares the deployment directory with its version in base,
// without a cluster: objects added, modified and stale per release.
func (m *Opm) Review(
	ctx context.Context,
	// The same repository at the base ref.
	base *dagger.Directory,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
) (ret *ChangesResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, err := m.selection(ctx, env, release, nil)
	if err != nil {
		return nil, err
	}
	baseRoot, err := export(ctx, base, "base")
	if err != nil {
		return nil, err
	}
	cacheKey, err := m.renderCacheKey(ctx)
	if err != nil {
		return nil, err
	}
	cacheDir := restoreRenderCache(ctx)
	cs, err := pipeline.Review(ctx, pipeline.ReviewOptions{Selection: sel, BaseDir: filepath.Join(baseRoot, m.Path), CacheDir: cacheDir, CacheKey: cacheKey})
	if err != nil {
		return nil, err
	}
	saveRenderCache(ctx, cacheDir)
	res, err := m.changes(ctx, cs)
	if res != nil {
		res.Renders, res.CachedRenders = cs.RenderCounts()
	}
	return res, err
}

// Diff compares the rendered releases with the cluster.
// +cache="never"
func (m *Opm) Diff(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// +optional
	values []*dagger.File,
) (ret *ChangesResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, values)
	if err != nil {
		return nil, err
	}
	cs, err := pipeline.Diff(ctx, pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	if cs == nil {
		return nil, err
	}
	failed(ctx, report.Text(cs, false), err)
	out, serr := m.changes(ctx, cs)
	if serr != nil {
		return nil, serr
	}
	return out, err
}

// ApplyResult is the result of Apply and Prune.
type ApplyResult struct {
	// Summary is one line per release (counts, digest, change id, inventory).
	Summary string
	// Rollout is the per-environment table of a fleet: wave, context,
	// result (applied, failed, unhealthy, gated, not started), change IDs.
	Rollout string
	// Pruned lists what was deleted ("release: kind/namespace/name").
	Pruned []string
	Json   string
}

// Apply applies the releases with server-side apply, prunes what they no
// longer render, and records the inventory.
// +cache="never"
func (m *Opm) Apply(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// +optional
	noPrune bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// Let prune delete stale CustomResourceDefinitions, and every custom
	// resource of their kinds, cluster-wide.
	// +optional
	pruneCrds bool,
	// +optional
	force bool,
	// +optional
	adopt bool,
	// Field managers whose fields apply takes over from objects they wrote
	// (names, or prefixes ending in *); default kubectl, kubectl-*,
	// before-first-apply, helm.
	// +optional
	takeOver []string,
	// Take fields that other field managers own with other values
	// (recorded in the change).
	// +optional
	forceConflicts bool,
	// Also prune ghosts: objects carrying the release's id that it neither
	// records nor renders.
	// +optional
	pruneGhosts bool,
	// +optional
	// +default=10
	maxHistory int,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
	// Apply without checking the environment's promotion gates (recorded
	// in the change).
	// +optional
	skipGates bool,
	// Every environment of this group, as Rollout does (env may also name
	// a group or list several): wave by wave, a wave's environments at once.
	// +optional
	group string,
	// Finish once applied instead of waiting until the applied releases
	// are healthy.
	// +optional
	noWait bool,
	// How long the applied releases may take to become healthy.
	// +optional
	// +default="5m"
	timeout string,
) (ret *ApplyResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, values)
	if err != nil {
		return nil, err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return nil, err
	}
	wait, err := time.ParseDuration(timeout)
	if err != nil {
		return nil, fmt.Errorf("timeout %q: %w", timeout, err)
	}
	sel.Group = group
	// Routed as the CLI routes it: one environment applied and waited for,
	// a fleet wave by wave (its waves' table in Rollout).
	res, err := pipeline.Deploy(ctx, pipeline.RolloutOptions{ApplyOptions: pipeline.ApplyOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun, NoPrune: noPrune,
		Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs, PruneCRDs: pruneCrds}, Force: force, Adopt: adopt, TakeOver: takeOver, ForceConflicts: forceConflicts, MaxHistory: maxHistory,
		PruneGhosts: pruneGhosts, Locking: lk, SkipGates: skipGates, SkippedBy: "dagger opm module"}, ParallelEnvironments: 4, Timeout: wait, NoWait: noWait})
	switch {
	case res == nil:
		return nil, err
	case res.Apply != nil:
		return applied(ctx, res.Apply, err)
	}
	return rolledOut(ctx, res.Rollout, err)
}

// rolledOut is a rollout's result: every environment's releases, and the
// waves' table.
func rolledOut(ctx context.Context, rr *pipeline.RolloutResult, err error) (*ApplyResult, error) {
	res := &pipeline.ApplyResult{}
	for _, e := range rr.Environments {
		res.Releases = append(res.Releases, e.Releases...)
	}
	out, aerr := applied(ctx, res, err)
	if out != nil {
		out.Rollout = report.RolloutTable(rr)
		out.Json = jsonOf(rr)
	}
	return out, aerr
}

// Rollout applies a fleet (env naming a group or several environments, or
// group) wave by wave: the environments of a wave as concurrent operations
// of this one call (parallelEnvironments), each wave healthy (timeout)
// before the next, promotion gates checked; the first failure stops every
// later wave. Its result carries the per-environment table.
// +cache="never"
func (m *Opm) Rollout(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	group string,
	// Releases to select (repeat the flag); default all.
	// +optional
	release []string,
	// +optional
	dryRun bool,
	// Apply this wave only.
	// +optional
	// +default=-1
	wave int,
	// Environments of one wave applied at once.
	// +optional
	// +default=4
	parallelEnvironments int,
	// How long each wave may take to become healthy.
	// +optional
	// +default="5m"
	timeout string,
	// +optional
	skipGates bool,
	// Smoke-test each environment of a wave on its own cluster, in
	// throwaway namespaces, once the wave is healthy.
	// +optional
	smoke bool,
) (ret *ApplyResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, wait, err := m.fleetInputs(ctx, env, group, release, timeout)
	if err != nil {
		return nil, err
	}
	ro := pipeline.RolloutOptions{
		ApplyOptions: pipeline.ApplyOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun,
			SkipGates: skipGates, SkippedBy: "dagger opm module", Locking: pipeline.Locking{Holder: "dagger opm module", LockTimeout: 5 * time.Minute}},
		ParallelEnvironments: parallelEnvironments, Timeout: wait, Smoke: smoke,
	}
	if wave >= 0 {
		ro.Wave = &wave
	}
	rr, err := pipeline.Rollout(ctx, ro)
	if rr == nil {
		return nil, err
	}
	return rolledOut(ctx, rr, err)
}

// Plan lays the selected environments (default all; env may name a group
// or list several) out for CI: {"matrix": {"include": […]}, "waves": […],
// "waveMatrices": {…}}, as the Action's plan mode does.
func (m *Opm) Plan(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	group string,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, err := m.selection(ctx, env, nil, nil)
	if err != nil {
		return "", err
	}
	sel.Group = group
	p, err := pipeline.PlanFleet(ctx, sel)
	if err != nil {
		return "", err
	}
	return jsonOf(p), nil
}

// ReviewShard reviews part shard ("2/8") of the review of the source
// against baseRef and returns it as a partial review (JSON) for `opm
// review merge`, which combines every shard's into the one review. The
// base is read from the source's git repository, so the source must hold
// its .git directory, and must be a commit (no uncommitted changes).
func (m *Opm) ReviewShard(
	ctx context.Context,
	// Branch or commit to review against (its merge base with HEAD).
	baseRef string,
	// This shard, I/N.
	shard string,
	// +optional
	env []string,
	// Releases to select (repeat the flag); default all.
	// +optional
	release []string,
	// The plan plan-review returned with shards set: this shard reviews
	// what its split assigns it (give it to every shard or to none);
	// without it, pairs are dealt out by count.
	// +optional
	plan *dagger.File,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sh, err := pipeline.ParseShard(shard)
	if err != nil {
		return "", err
	}
	sel, err := m.selection(ctx, "", release, nil)
	if err != nil {
		return "", err
	}
	opts := pipeline.ReviewOptions{Selection: sel, Environments: env, BaseRefs: pipeline.BaseRef(baseRef), Shard: sh}
	if plan != nil {
		name := filepath.Join(os.TempDir(), "opm-review-plan.json")
		if _, err := plan.Export(ctx, name); err != nil {
			return "", err
		}
		if opts.Split, err = pipeline.ReadSplit(name); err != nil {
			return "", err
		}
	}
	if opts.CacheKey, err = m.renderCacheKey(ctx); err != nil {
		return "", err
	}
	opts.CacheDir = restoreRenderCache(ctx)
	part, err := pipeline.ReviewShard(ctx, opts)
	if err != nil {
		return "", err
	}
	saveRenderCache(ctx, opts.CacheDir)
	part.ChangeSet = part.ChangeSet.Sealed(redact.From(ctx).Sealer())
	return jsonOf(part), nil
}

// MergeReviews combines the partial reviews every review-shard returned
// (one file each, in any order) into the review they are parts of, as
// `opm review merge` and the Action's merge mode do: it refuses parts of
// different reviews, a shard given twice and a shard missing.
func (m *Opm) MergeReviews(
	ctx context.Context,
	// Every shard's partial review (review-shard's output, saved to a file).
	parts []*dagger.File,
) (ret *ChangesResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	dir, err := os.MkdirTemp("", "opm-partials-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = filepath.Join(dir, fmt.Sprintf("part-%d.json", i))
		if _, err := p.Export(ctx, names[i]); err != nil {
			return nil, err
		}
	}
	cs, err := pipeline.MergeReviewFiles(names...)
	if err != nil {
		return nil, err
	}
	return m.changes(ctx, cs)
}

// PlanReview plans the review of the source against baseRef without
// rendering (JSON: pairs, unchanged, renders, cached, seconds, plan), as
// the Action's plan mode does to size a sharded review; with shards, it
// also splits the pairs into that many shards balanced by estimated cost
// (give the result to every review-shard as plan). The source must hold
// its .git directory.
func (m *Opm) PlanReview(
	ctx context.Context,
	// Branch or commit to review against (its merge base with HEAD).
	baseRef string,
	// +optional
	env []string,
	// +optional
	release []string,
	// Split the pairs into this many shards (0: no split).
	// +optional
	shards int,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, err := m.selection(ctx, "", release, nil)
	if err != nil {
		return "", err
	}
	// The plan reads the cache (what is cached, what renders cost) and
	// writes nothing to it.
	cacheKey, err := m.renderCacheKey(ctx)
	if err != nil {
		return "", err
	}
	p, err := pipeline.PlanReview(ctx, pipeline.ReviewOptions{Selection: sel, Environments: env, BaseRefs: pipeline.BaseRef(baseRef),
		CacheDir: restoreRenderCache(ctx), CacheKey: cacheKey})
	if err != nil {
		return "", err
	}
	if shards > 0 {
		p.SplitInto(shards)
	}
	return jsonOf(p), nil
}

// Explain lists, per selected release, its input fingerprint and every
// input it covers with its SHA-256, or why it has none (`opm explain -o
// json`): how to check why apply, diff or review skipped a render.
func (m *Opm) Explain(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// +optional
	values []*dagger.File,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, err := m.selection(ctx, env, release, values)
	if err != nil {
		return "", err
	}
	ex, err := pipeline.Explain(ctx, sel)
	if err != nil {
		return "", err
	}
	return jsonOf(ex), nil
}

// Prune deletes what the releases no longer render, without applying.
// +cache="never"
func (m *Opm) Prune(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// Let prune delete stale CustomResourceDefinitions, and every custom
	// resource of their kinds, cluster-wide.
	// +optional
	pruneCrds bool,
	// +optional
	force bool,
	// Also prune ghosts: objects carrying the release's id that it neither
	// records nor renders.
	// +optional
	ghosts bool,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
) (ret *ApplyResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, values)
	if err != nil {
		return nil, err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Prune(ctx, pipeline.PruneOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun,
		Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs, PruneCRDs: pruneCrds}, Force: force, Ghosts: ghosts, Locking: lk})
	return applied(ctx, res, err)
}

func applied(ctx context.Context, res *pipeline.ApplyResult, err error) (*ApplyResult, error) {
	if res == nil {
		return nil, err
	}
	failed(ctx, report.ApplySummary(res), err)
	return &ApplyResult{Summary: report.ApplySummary(res), Pruned: res.PrunedObjects(), Json: jsonOf(res)}, err
}

// StatusResult is the result of Status.
type StatusResult struct {
	Healthy bool
	Table   string
	Json    string
}

// Status reports the health of the releases' objects; with wait, it
// waits until all are ready or one fails.
// +cache="never"
func (m *Opm) Status(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// +optional
	wait bool,
	// +optional
	// +default="5m"
	timeout string,
) (ret *StatusResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, nil)
	if err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Status(ctx, pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co, Wait: wait, Timeout: d})
	if res == nil {
		return nil, err
	}
	failed(ctx, report.StatusTable(res), err)
	return &StatusResult{Healthy: res.Healthy, Table: report.StatusTable(res), Json: jsonOf(res)}, err
}

// Gates checks one environment's promotion gates without applying it
// (opm gates): the environments it follows must run this commit, healthy
// (and soaked). With gateTimeout, it waits up to that long for them to
// pass. It returns the outcome line, or fails with the refusal: the step
// before an approval-protected apply.
// +cache="never"
func (m *Opm) Gates(
	ctx context.Context,
	env string,
	// How long to wait for the gates to pass (a Go duration); "0" fails at once.
	// +optional
	// +default="0"
	gateTimeout string,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, nil, nil)
	if err != nil {
		return "", err
	}
	d, err := time.ParseDuration(gateTimeout)
	if err != nil {
		return "", fmt.Errorf("gateTimeout: %w", err)
	}
	res, err := pipeline.Gates(ctx, pipeline.GatesOptions{Selection: sel, ClusterOptions: co, GateTimeout: d,
		GateWaiting: func(refusal error) { fmt.Fprintln(os.Stderr, refusal) }})
	if err != nil {
		return "", err
	}
	return res.Line(), nil
}

// DeleteResult is the result of Delete.
type DeleteResult struct {
	Summary string
	Json    string
}

// Delete removes the releases' objects, then their inventory.
// +cache="never"
func (m *Opm) Delete(
	ctx context.Context,
	// +optional
	env string,
	// Releases to select (repeat the flag); default all of the environment.
	// +optional
	release []string,
	// +optional
	dryRun bool,
	// +optional
	wait bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// Let prune delete stale CustomResourceDefinitions, and every custom
	// resource of their kinds, cluster-wide.
	// +optional
	pruneCrds bool,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
) (ret *DeleteResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, nil)
	if err != nil {
		return nil, err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Delete(ctx, pipeline.DeleteOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co,
		DryRun: dryRun, Wait: wait, Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs, PruneCRDs: pruneCrds}, Locking: lk})
	if res == nil {
		return nil, err
	}
	failed(ctx, report.DeleteSummary(res), err)
	return &DeleteResult{Summary: report.DeleteSummary(res), Json: jsonOf(res)}, err
}

// RBACResult is the result of RBAC.
type RBACResult struct {
	// Yaml is `opm rbac` (for kubectl apply -f -); Json `opm rbac -o json`.
	Yaml string
	Json string
}

// RBAC prints the Roles and bindings the identity the environment
// impersonates (cluster.impersonate) needs for exactly what its releases
// render, their inventory Secrets and their Leases.
// +cache="never"
func (m *Opm) RBAC(
	ctx context.Context,
	env string,
	// +optional
	release []string,
) (ret *RBACResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, nil)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.RBAC(ctx, pipeline.RBACOptions{Selection: sel, ClusterOptions: co})
	if err != nil {
		return nil, err
	}
	y, err := report.RBACYAML(res)
	if err != nil {
		return nil, err
	}
	return &RBACResult{Yaml: string(y), Json: jsonOf(res)}, nil
}

// HistoryResult is the result of History.
type HistoryResult struct {
	// Table is `opm history`; Json `opm history -o json`.
	Table string
	Json  string
}

// History lists the changes recorded in the releases' inventories, newest
// first, with where each came from.
// +cache="never"
func (m *Opm) History(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	release []string,
) (ret *HistoryResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, nil)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.History(ctx, pipeline.HistoryOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co})
	if err != nil {
		return nil, err
	}
	return &HistoryResult{Table: report.HistoryTable(res), Json: jsonOf(res)}, nil
}

// Rollback returns a release to an earlier change: the source is rendered
// as of the commit that change recorded and applied as a new change, with
// every guard of apply. The commit is read from the source's git
// repository, so the source must hold its .git directory (the default
// source leaves .git out; without it rollback says it is not in a git
// repository).
// +cache="never"
func (m *Opm) Rollback(
	ctx context.Context,
	// The release to roll back.
	release string,
	// The change ID to return to (see history).
	to string,
	// +optional
	env string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// +optional
	allowDifferentDigest bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// Let prune delete stale CustomResourceDefinitions, and every custom
	// resource of their kinds, cluster-wide.
	// +optional
	pruneCrds bool,
	// +optional
	// +default=10
	maxHistory int,
) (ret *ApplyResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, []string{release}, values)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Rollback(ctx, pipeline.RollbackOptions{
		ApplyOptions: pipeline.ApplyOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun, MaxHistory: maxHistory,
			Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs, PruneCRDs: pruneCrds}},
		To: to, AllowDifferentDigest: allowDifferentDigest,
	})
	if res == nil {
		return nil, err
	}
	return &ApplyResult{Summary: report.ApplySummary(&res.ApplyResult), Pruned: res.PrunedObjects(), Json: jsonOf(res)}, err
}

// RollbackFleet returns every environment of a fleet selection (env
// naming a group or several environments, or group) to the git commit
// to: each release goes back to the newest change its inventory records
// from that commit, the last wave first, each waited for until healthy
// before the one before it. Nothing is written unless every selected
// release in every environment ran that commit before. As `opm rollback
// --group`; the source must hold its .git directory.
// +cache="never"
func (m *Opm) RollbackFleet(
	ctx context.Context,
	// The git commit (or ref) to return to.
	to string,
	// +optional
	env string,
	// +optional
	group string,
	// Releases to select (repeat the flag); default all.
	// +optional
	release []string,
	// +optional
	dryRun bool,
	// +optional
	allowDifferentDigest bool,
	// How long each wave may take to become healthy.
	// +optional
	// +default="5m"
	timeout string,
) (ret *ApplyResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, wait, err := m.fleetInputs(ctx, env, group, release, timeout)
	if err != nil {
		return nil, err
	}
	rr, err := pipeline.RollbackFleet(ctx, pipeline.RollbackOptions{
		ApplyOptions: pipeline.ApplyOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun,
			Locking: pipeline.Locking{Holder: "dagger opm module", LockTimeout: 5 * time.Minute}},
		To: to, AllowDifferentDigest: allowDifferentDigest,
	}, wait)
	if rr == nil {
		return nil, err
	}
	return rolledOut(ctx, rr, err)
}

// VersionResult says which opm the module runs.
type VersionResult struct {
	Version    string
	Commit     string
	Date       string
	GoVersion  string
	CueVersion string
	// Catalog is the embedded OPM catalog module and its version.
	Catalog string
	// Text is `opm version`, Json `opm version -o json`.
	Text string
	Json string
}

// Version reports the opm build inside the module: version, commit, build
// date, Go and CUE versions and the embedded catalog.
func (m *Opm) Version() *VersionResult {
	i := buildinfo.Read()
	return &VersionResult{Version: i.Version, Commit: i.Commit, Date: i.Date, GoVersion: i.GoVersion, CueVersion: i.CUEVersion,
		Catalog: i.Catalog, Text: i.Text(), Json: jsonOf(i)}
}

// Repair rebuilds the releases' inventories from their labelled objects
// and their render, keeping the old data in a backup Secret.
// +cache="never"
func (m *Opm) Repair(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	release []string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	sel, co, err := m.clusterInputs(ctx, env, release, values)
	if err != nil {
		return "", err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return "", err
	}
	res, err := pipeline.Repair(ctx, pipeline.RepairOptions{Selection: sel, ClusterOptions: co, Locking: lk, DryRun: dryRun})
	if res == nil {
		return "", err
	}
	return jsonOf(res), err
}

// Unlock breaks a release's lock by hand and says who held it.
// +cache="never"
func (m *Opm) Unlock(
	ctx context.Context,
	// The release's name.
	name string,
	// The release's namespace.
	namespace string,
	// The release id, when several releases share the name.
	// +optional
	releaseId string,
) (ret string, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	co, err := m.cluster(ctx)
	if err != nil {
		return "", err
	}
	res, err := pipeline.Unlock(ctx, pipeline.UnlockOptions{ClusterOptions: co, Namespace: namespace, Name: name, ReleaseID: releaseId})
	if err != nil {
		return "", err
	}
	if !res.Held {
		return fmt.Sprintf("release %s in %s is not locked", name, namespace), nil
	}
	return fmt.Sprintf("unlocked: Lease %s/%s was held by %s", namespace, res.Lease, res.Holder), nil
}

// locking is the release lock's options: the holder names this Dagger
// run (the container's hostname is unique to the function call) unless
// the caller passes its own identity, such as a CI run URL.
func locking(holder, timeout string) (pipeline.Locking, error) {
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return pipeline.Locking{}, fmt.Errorf("lockTimeout %q: %w", timeout, err)
	}
	if holder == "" {
		host, _ := os.Hostname()
		holder = "dagger opm module on " + host
	}
	return pipeline.Locking{Holder: holder, LockTimeout: d, NoLockWait: d == 0}, nil
}

// selection materialises the source and values files in the container.
func (m *Opm) selection(ctx context.Context, env string, releases []string, values []*dagger.File) (pipeline.Selection, error) {
	root, err := export(ctx, m.Source, "source")
	if err != nil {
		return pipeline.Selection{}, err
	}
	sel := pipeline.Selection{Dir: filepath.Join(root, m.Path), Environment: env, Releases: releases}
	// Secrets stay in memory: never exported, never in a layer.
	if vs, err := plaintext(ctx, m.ValuesSecret); err != nil {
		return sel, fmt.Errorf("reading valuesSecret: %w", err)
	} else if vs != "" {
		sel.SecretValues = []pipeline.SecretValues{{Name: "valuesSecret", Data: []byte(vs)}}
	}
	if key, err := plaintext(ctx, m.SopsAgeKey); err != nil {
		return sel, fmt.Errorf("reading sopsAgeKey: %w", err)
	} else if key = strings.TrimSpace(key); key != "" {
		sel.AgeKeys = []string{key}
	}
	if len(values) == 0 {
		return sel, nil
	}
	dir, err := os.MkdirTemp("", "opm-values-")
	if err != nil {
		return sel, err
	}
	for i, f := range values {
		name, err := f.Name(ctx)
		if err != nil {
			return sel, err
		}
		// Numbered so two files with one name keep their order and both.
		p := filepath.Join(dir, fmt.Sprintf("%02d-%s", i, name))
		if _, err := f.Export(ctx, p); err != nil {
			return sel, err
		}
		sel.ValuesFiles = append(sel.ValuesFiles, p)
	}
	return sel, nil
}

// fleetInputs are the selection, cluster and per-wave timeout of a
// function that applies a fleet (rollout, rollback-fleet).
func (m *Opm) fleetInputs(ctx context.Context, env, group string, releases []string, timeout string) (pipeline.Selection, pipeline.ClusterOptions, time.Duration, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, nil)
	if err != nil {
		return sel, co, 0, err
	}
	sel.Group = group
	wait, err := time.ParseDuration(timeout)
	if err != nil {
		return sel, co, 0, fmt.Errorf("timeout %q: %w", timeout, err)
	}
	return sel, co, wait, nil
}

// clusterInputs is selection and cluster together, for the functions that
// reach a cluster.
func (m *Opm) clusterInputs(ctx context.Context, env string, releases []string, values []*dagger.File) (pipeline.Selection, pipeline.ClusterOptions, error) {
	sel, err := m.selection(ctx, env, releases, values)
	if err != nil {
		return sel, pipeline.ClusterOptions{}, err
	}
	co, err := m.cluster(ctx)
	return sel, co, err
}

// cluster reads the kubeconfig secret into memory only, refuses what a
// container cannot use (exec plugins, file paths) and points it at the
// --cluster service when one is given.
func (m *Opm) cluster(ctx context.Context) (pipeline.ClusterOptions, error) {
	co := pipeline.ClusterOptions{Context: m.Context}
	if m.Kubeconfig == nil {
		if m.Cluster != nil {
			return co, fmt.Errorf("--cluster needs --kubeconfig: the service carries the connection, the kubeconfig the credentials")
		}
		return co, nil
	}
	data, err := m.Kubeconfig.Plaintext(ctx)
	if err != nil {
		return co, err
	}
	server := ""
	if m.Cluster != nil {
		svc, err := m.Cluster.Start(ctx)
		if err != nil {
			return co, fmt.Errorf("start the --cluster service: %w", err)
		}
		if server, err = svc.Endpoint(ctx); err != nil {
			return co, fmt.Errorf("the --cluster service's endpoint: %w", err)
		}
	}
	co.KubeconfigData, err = pipeline.ContainerKubeconfig([]byte(data), server)
	return co, err
}

// failed prints what an operation did before it failed: Dagger drops the
// result of a function that returns an error, so this is the only way the
// caller sees what was applied and what was not.
func failed(ctx context.Context, text string, err error) {
	if err != nil && text != "" {
		fmt.Fprintln(os.Stderr, redact.From(ctx).String(text))
	}
}

// redacting returns ctx carrying this call's redactor (engine/redact), the
// one point every returned value, file and log line passes through; a
// call made by another function keeps its caller's.
func (m *Opm) redacting(ctx context.Context) context.Context {
	if redact.From(ctx) != nil {
		return ctx
	}
	// An unreadable seal key seals with a random key of this call.
	key, _ := plaintext(ctx, m.SealKey)
	// One connection and discovery per cluster for the call.
	return pipeline.WithSession(redact.With(ctx, redact.New(pipeline.NewSealer(key))))
}

// publish redacts what a function returns: every string of the result,
// however deep (a File's content is one), and the error. Deferred by every
// function, it also recovers a panic (a bug; worker goroutines raise
// theirs in the goroutine that waits, engine/workers): the function fails
// with one error line through the redactor, never a stack trace.
func publish(ctx context.Context, ret any, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("opm failed on an internal error (a bug; please report it with the call you made): %v", r)
	}
	red := redact.From(ctx)
	*err = red.Error(*err)
	red.Value(ret)
}

func export(ctx context.Context, dir *dagger.Directory, name string) (string, error) {
	root, err := os.MkdirTemp("", "opm-"+name+"-")
	if err != nil {
		return "", err
	}
	if _, err := dir.Export(ctx, root); err != nil {
		return "", err
	}
	return root, nil
}

func jsonOf(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}

// k3sImage pins the throwaway cluster Smoke runs: k3s, a complete
// Kubernetes (controllers, scheduler, kubelet) in one container.
const k3sImage = "rancher/k3s:v1.34.1-k3s1"

// k3sCgroupInit runs before k3s. k3s sets up cgroup v2 nesting only when it
// is PID 1, which it is not under Dagger's process shim, so do it here:
// move every process out of the root cgroup, then delegate all controllers
// to children (what the kubelet's pods need).
const k3sCgroupInit = `#!/bin/sh
set -eu
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	mkdir -p /sys/fs/cgroup/opm-init
	while read -r pid; do echo "$pid" > /sys/fs/cgroup/opm-init/cgroup.procs 2>/dev/null || true; done < /sys/fs/cgroup/cgroup.procs
	for c in $(cat /sys/fs/cgroup/cgroup.controllers); do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control; done
fi
exec "$@"
`

// k3sReady waits until the API answers, a node is Ready and new namespaces
// get their default ServiceAccount, then prints the admin kubeconfig.
const k3sReady = `set -eu
until [ -s /k3s-config/k3s.yaml ]; do sleep 1; done
k() { k3s kubectl --kubeconfig /k3s-config/k3s.yaml --server https://k3s:6443 "$@"; }
until k get --raw /readyz >/dev/null 2>&1; do sleep 1; done
until k get nodes -o name 2>/dev/null | grep -q node; do sleep 1; done
k wait --for=condition=Ready nodes --all --timeout=180s >/dev/null
until k -n default get serviceaccount default >/dev/null 2>&1; do sleep 1; done
cat /k3s-config/k3s.yaml
`

// SmokeResult is the result of Smoke.
type SmokeResult struct {
	// Passed is true when every release passed every step.
	Passed bool
	// Markdown is the report for a pull request or job summary; Text the
	// terminal form.
	Markdown string
	Text     string
	Json     string
}

// Smoke starts a throwaway k3s cluster and smoke-tests the releases on it:
// each in a namespace of its own, apply → healthy → a second apply changes
// nothing → delete → nothing left. The cluster's kubeconfig stays inside
// the module; the cluster is stopped at the end.
// +cache="never"
func (m *Opm) Smoke(
	ctx context.Context,
	env string,
	// +optional
	release []string,
	// How long to wait for every object to become healthy.
	// +optional
	// +default="5m"
	timeout string,
) (ret *SmokeResult, retErr error) {
	ctx = m.redacting(ctx)
	defer publish(ctx, &ret, &retErr)
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return nil, fmt.Errorf("timeout %q: %w", timeout, err)
	}
	sel, err := m.selection(ctx, env, release, nil)
	if err != nil {
		return nil, err
	}
	svc, kubeconfig, err := startK3s(ctx)
	if svc != nil {
		defer svc.Stop(context.WithoutCancel(ctx), dagger.ServiceStopOpts{Kill: true})
	}
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Smoke(ctx, pipeline.SmokeOptions{Selection: sel, ClusterOptions: pipeline.ClusterOptions{KubeconfigData: kubeconfig}, Timeout: d})
	if res == nil {
		return nil, err
	}
	return &SmokeResult{Passed: res.Passed, Markdown: report.SmokeMarkdown(res, report.MarkdownOptions{}), Text: report.SmokeText(res), Json: jsonOf(res)}, err
}

// startK3s runs k3s as a privileged service, waits until it can run pods
// and returns a kubeconfig for it, held in memory only.
func startK3s(ctx context.Context) (*dagger.Service, []byte, error) {
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	// k3s writes its kubeconfig here; a volume per run, so no run reads
	// another's credentials.
	conf := dag.CacheVolume("opm-smoke-k3s-" + run)
	svc, err := dag.Container().From(k3sImage).
		WithNewFile("/usr/local/bin/opm-cgroup-init", k3sCgroupInit, dagger.ContainerWithNewFileOpts{Permissions: 0o755}).
		WithEntrypoint([]string{"/usr/local/bin/opm-cgroup-init"}).
		WithMountedCache("/etc/rancher/k3s", conf).
		WithMountedTemp("/var/lib/kubelet").
		WithMountedTemp("/var/lib/cni").
		WithMountedTemp("/var/log").
		WithEnvVariable("OPM_SMOKE_RUN", run).
		WithExposedPort(6443).
		AsService(dagger.ContainerAsServiceOpts{
			// The API server binds the container's own address, the one
			// Dagger's service check and other containers reach.
			Args: []string{"sh", "-c", `exec k3s server --bind-address "$(ip route | awk '/ src / {print $NF; exit}')" ` +
				`--tls-san k3s --disable traefik --disable metrics-server --egress-selector-mode disabled`},
			UseEntrypoint:            true,
			InsecureRootCapabilities: true,
		}).Start(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("starting k3s (%s): %w", k3sImage, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	raw, err := dag.Container().From(k3sImage).WithoutEntrypoint().
		WithEnvVariable("OPM_SMOKE_RUN", run).
		WithMountedCache("/k3s-config", conf).
		WithServiceBinding("k3s", svc).
		WithExec([]string{"sh", "-c", k3sReady}).
		Stdout(wctx)
	if err != nil {
		return svc, nil, fmt.Errorf("waiting for k3s to run pods: %w", err)
	}
	endpoint, err := svc.Endpoint(ctx, dagger.ServiceEndpointOpts{Port: 6443})
	if err != nil {
		return svc, nil, fmt.Errorf("k3s endpoint: %w", err)
	}
	kc, err := k3sKubeconfig(raw, endpoint)
	return svc, kc, err
}

// k3sKubeconfig builds a kubeconfig for endpoint from the credentials in
// k3s's own (which points at 127.0.0.1). The endpoint's generated host name
// is not in the serving certificate; "kubernetes" always is.
func k3sKubeconfig(raw, endpoint string) ([]byte, error) {
	field := func(name string) (string, error) {
		for _, line := range strings.Split(raw, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+": "); ok {
				return strings.TrimSpace(v), nil
			}
		}
		return "", fmt.Errorf("the k3s kubeconfig has no %s", name)
	}
	var vals [3]string
	for i, name := range []string{"certificate-authority-data", "client-certificate-data", "client-key-data"} {
		v, err := field(name)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: opm-smoke-k3s
  cluster:
    server: https://%s
    tls-server-name: kubernetes
    certificate-authority-data: %s
users:
- name: opm-smoke-k3s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: opm-smoke-k3s
  context:
    cluster: opm-smoke-k3s
    user: opm-smoke-k3s
current-context: opm-smoke-k3s
`, endpoint, vals[0], vals[1], vals[2])), nil
}
