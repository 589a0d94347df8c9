package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/operation"
	"github.com/opmodel/pipeline/pipeline/rollout"
)

// ApplyOptions are the options of Apply.
type ApplyOptions struct {
	Selection
	ClusterOptions
	// DryRun runs the whole flow as server-side dry runs and writes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// NoPrune keeps the stale set (still recorded in the inventory). The
	// existence check of objects not yet recorded runs regardless.
	NoPrune bool `json:"noPrune,omitempty"`
	// PruneGhosts also prunes ghosts: objects carrying the release's id
	// that are neither recorded nor rendered (diff's ghost set).
	PruneGhosts bool `json:"pruneGhosts,omitempty"`
	Protection
	// Force lets an empty render prune a whole release and recreates
	// objects whose immutable fields change.
	Force bool `json:"force,omitempty"`
	Locking
	// Adopt lets apply take over existing objects this release did not
	// create (otherwise an object not yet recorded must not exist unless it
	// carries this release's labels).
	Adopt bool `json:"adopt,omitempty"`
	// TakeOver are the field managers whose fields apply takes over from
	// objects they wrote (exact names, or prefixes ending in "*"); nil is
	// objects.DefaultTakeOver(): kubectl's commands, before-first-apply, helm.
	TakeOver []string `json:"takeOver,omitempty"`
	// ForceConflicts takes fields that managers outside TakeOver own with
	// other values (otherwise such an object fails, naming field and
	// manager); the change records whose fields were taken.
	ForceConflicts bool `json:"forceConflicts,omitempty"`
	// MaxHistory caps the inventory's change history; 10 when zero.
	MaxHistory int `json:"maxHistory,omitempty"`
	// Concurrency bounds parallel requests per weight stage; 8 when zero.
	Concurrency int `json:"concurrency,omitempty"`
	// RunURL is the CI run applying the change, recorded in the
	// inventory with the git state of the deployment directory.
	RunURL string `json:"runUrl,omitempty"`
	// Actor is who applies, as the change records it; Actor(os.Getenv)
	// when empty.
	Actor string `json:"actor,omitempty"`
	// Progress receives one event per object as it is applied or pruned,
	// never concurrently.
	Progress func(ProgressEvent) `json:"-"`
	// ReleaseDone receives each release's result as soon as it is done
	// (failed ones too), so a front door can print its summary in place.
	ReleaseDone func(AppliedRelease) `json:"-"`

	// NoSkip renders and applies even when the inputs are those of the
	// recorded change and nothing on the cluster moved (the fast path
	// that skips the render, see reconcile.Unmoved).
	NoSkip bool `json:"noSkip,omitempty"`

	// SkipGates applies without checking the environment's promotion
	// gates (rollout.after); SkippedBy, who did, is recorded in the change.
	SkipGates bool   `json:"skipGates,omitempty"`
	SkippedBy string `json:"skippedBy,omitempty"`
	// GateTimeout, when positive, waits up to that long for the gates to
	// pass (the gating environments to run this commit, healthy) instead
	// of refusing at once: every environment of a fleet can start
	// together, and each applies when its gates open, so a workflow needs
	// no job per wave. GateWaiting hears each refusal it waits out.
	GateTimeout time.Duration       `json:"gateTimeout,omitempty"`
	GateWaiting func(refusal error) `json:"-"`

	// Wait waits, once every release is applied, until the applied
	// releases are healthy (every object Current by kstatus), as `timoni
	// apply` does: a deploy job goes red on an image that never pulls,
	// naming what its pods report, instead of the next wave's job. At most
	// WaitTimeout (5m when 0); never in a dry run. A fleet waits per wave
	// (RolloutOptions) instead. HealthWaiting hears what is waited for
	// (a rollout's wave waits and soaks too, for a wave's environments at
	// once).
	Wait          bool                 `json:"wait,omitempty"`
	WaitTimeout   time.Duration        `json:"waitTimeout,omitempty"`
	HealthWaiting func(waiting string) `json:"-"`

	// shownDir is the deployment directory the user named, when Selection.Dir
	// is a checkout of another commit (a rollback's): next steps name it.
	shownDir string
}

// shown is the deployment directory as the user named it.
func (o ApplyOptions) shown() string { return cmp.Or(o.shownDir, o.Selection.Dir) }

// ProgressEvent reports one object applied or pruned; Line() is its
// kubectl-style text.
type ProgressEvent = reconcile.Event

// InventoryRef names a release's inventory Secret and its change IDs.
type InventoryRef = reconcile.InventoryRef

// ApplyCounts sums the actions of one release.
type ApplyCounts = reconcile.Counts

// ApplyResult is what Apply and Prune return; its JSON form is what
// `opm apply -o json` and `opm prune -o json` print.
type ApplyResult struct {
	Releases []AppliedRelease `json:"releases"`
}

// AppliedRelease is one release's render result plus what happened on the
// cluster.
type AppliedRelease struct {
	RenderedRelease
	// Operation is "apply" or "prune".
	Operation string     `json:"operation"`
	Cluster   ClusterRef `json:"cluster"`
	DryRun    bool       `json:"dryRun"`
	// Changes: the rendered objects reached, in apply order (none for
	// prune), the stale set in delete order, those pruned (would be, in a
	// dry run), those kept with the reason, and the ghosts found with
	// --prune-ghosts / --ghosts.
	reconcile.Changes
	Inventory       InventoryRef `json:"inventory"`
	Counts          ApplyCounts  `json:"counts"`
	DurationSeconds float64      `json:"durationSeconds"`
	Warnings        []string     `json:"warnings,omitempty"`
	// Error is set when this release failed; later releases were not touched.
	Error string `json:"error,omitempty"`
	// InputsIdentical is true when the release was not rendered: its
	// inputs are those of the recorded change and nothing on the cluster
	// moved, so every object is unchanged (Values are not shown then).
	InputsIdentical bool `json:"inputsIdentical,omitempty"`

	key string // the release's key in `releases`, for ordering
	// rendered is the release as this apply rendered it; nil when the
	// fast path found nothing moved and nothing was rendered.
	rendered *render.Release
}

// DefaultTakeOver is the take-over set apply uses when none is given.
func DefaultTakeOver() []string { return objects.DefaultTakeOver() }

// ClusterRef names the cluster a release was applied to.
type ClusterRef struct {
	Server  string `json:"server"`
	Context string `json:"context,omitempty"`
}

func (o ApplyOptions) reconcileOptions() reconcile.Options {
	return reconcile.Options{
		DryRun: o.DryRun, NoPrune: o.NoPrune, PruneNamespaces: o.PruneNamespaces, PrunePVCs: o.PrunePVCs, PruneCRDs: o.PruneCRDs,
		Force: o.Force, Adopt: o.Adopt, TakeOver: o.TakeOver, ForceConflicts: o.ForceConflicts, MaxHistory: o.MaxHistory, Concurrency: o.Concurrency, Progress: o.Progress,
		PruneGhosts: o.PruneGhosts,
		Lock:        o.Locking.options(),
	}
}

// Apply renders the selected releases and applies each to its cluster.
// An environment with promotion gates (rollout.after) is applied only
// with a commit its gating environments run, healthy; otherwise nothing
// is written (fault.Gate) unless SkipGates. A fleet selection (a group, a
// comma list) is rolled out wave by wave: Apply routes through deploy, the
// one place (with Deploy) that decides between one environment and
// Rollout; Rollout applies each environment with applyEnvironment.
//
// The apply follows the release inventory RFC (apply flow steps 1–8):
// apply in weight stages, prune the stale set, record the inventory.
// Releases are applied in order; the first that fails stops the run. The result covers every
// release reached, the failed one included, and is returned with the
// error.
func Apply(ctx context.Context, opts ApplyOptions) (*ApplyResult, error) {
	// A group or a list: Rollout's waves, with its defaults, as Deploy
	// routes them.
	dr, err := deploy(ctx, RolloutOptions{ApplyOptions: opts}, opts.Wait, opts.WaitTimeout, true)
	switch {
	case dr == nil:
		return nil, err
	case dr.Apply != nil:
		return dr.Apply, err
	}
	res := &ApplyResult{}
	for _, e := range dr.Rollout.Environments {
		res.Releases = append(res.Releases, e.Releases...)
	}
	return res, err
}

// applyEnvironment applies the selection in one environment (or none):
// known is that environment as the fleet declares it, when the caller read
// it (nil: its gates are read here). It routes nothing: Deploy decides
// between one environment and a rollout, whose environments come here.
func applyEnvironment(ctx context.Context, opts ApplyOptions, known *FleetEnvironment) (*ApplyResult, error) {
	if opts.NoSkip {
		ctx = operation.WithTransforms(ctx, nil) // --no-skip transforms every component too
	}
	gates := gatesOf(ctx, opts.Selection, known)
	ro := opts.reconcileOptions()
	ro.Source = changeSource(ctx, opts.RenderOptions(ctx).Dir, opts.RunURL, cmp.Or(opts.Actor, Actor(os.Getenv)))
	if len(gates.Gates) > 0 {
		if opts.SkipGates {
			if ro.Source == nil {
				ro.Source = &inventory.Source{}
			}
			ro.Source.GatesSkippedBy = cmp.Or(opts.SkippedBy, "unknown")
		} else if err := waitGates(ctx, opts, gates, opts.RenderOptions(ctx).Dir); err != nil {
			return nil, err
		}
	}
	sel := opts.Selection
	fps := fingerprints(ctx, sel)
	// The identities of the fast path and the render after it are of the
	// same deployment: it is loaded once.
	ctx = operation.WithLoads(ctx)
	var unmoved []AppliedRelease
	if !opts.NoSkip && fps != nil {
		var rest []string
		var err error
		if unmoved, rest, err = applyUnmoved(ctx, opts, sel, fps, ro); err != nil {
			return nil, err
		}
		if len(unmoved) > 0 && len(rest) == 0 {
			return &ApplyResult{Releases: unmoved}, nil
		}
		if len(unmoved) > 0 {
			sel.Releases = rest
		}
	}
	res, err := eachRelease(ctx, sel, fps, opts.ClusterOptions, "apply", opts.ReleaseDone, func(ctx context.Context, cl *kube.Cluster, rel *render.Release) (*reconcile.Result, error) {
		o, flush := redactedProgress(ctx, ro, rel)
		defer flush()
		return reconcile.Apply(ctx, cl, rel, o)
	})
	if res != nil && len(unmoved) > 0 {
		res.Releases = append(unmoved, res.Releases...)
		slices.SortStableFunc(res.Releases, func(a, b AppliedRelease) int { return cmp.Compare(a.key, b.key) })
	}
	if err == nil && opts.Wait && !opts.DryRun {
		err = waitApplied(ctx, opts, res)
	}
	return res, err
}

// waitApplied waits until the releases of res are healthy, for at most
// opts.WaitTimeout (5m when 0). The error names the environment, how long
// it waited and what the unhealthy objects' pods report.
func waitApplied(ctx context.Context, opts ApplyOptions, res *ApplyResult) error {
	if res == nil || len(res.Releases) == 0 {
		return nil
	}
	timeout := cmp.Or(opts.WaitTimeout, 5*time.Minute)
	sel := opts.Selection
	sel.Releases = nil
	for _, r := range res.Releases {
		sel.Releases = append(sel.Releases, r.key)
	}
	where := "releases " + strings.Join(sel.Releases, ", ")
	if sel.Environment != "" {
		where += " of environment " + sel.Environment
	}
	if opts.HealthWaiting != nil {
		opts.HealthWaiting(fmt.Sprintf("waiting up to %s for %s to become healthy (--no-wait skips this)", timeout, where))
	}
	start := time.Now()
	if healthy, why, unhealthy := waitHealthy(ctx, opts.ClusterOptions, sel, timeout, narration(opts.HealthWaiting, res.Releases), renderedOf(res.Releases)); !healthy {
		msg := fmt.Sprintf("%s applied, but not healthy after %s: %s", where, time.Since(start).Round(time.Second), why)
		if sel.Environment != "" {
			// What this apply changed can go back; the rest is not where
			// the failure came from.
			failed := RolloutEnvironment{FleetEnvironment: FleetEnvironment{Name: sel.Environment}, Result: RolloutUnhealthy, Releases: res.Releases, Unhealthy: unhealthy}
			msg += "\nnext: " + strings.Join(rollout.NextSteps(opts.shown(), failed, true), "\nnext: ")
		}
		return errors.New(msg)
	}
	if opts.HealthWaiting != nil {
		opts.HealthWaiting(fmt.Sprintf("%s healthy after %s", where, time.Since(start).Round(time.Second)))
	}
	return nil
}

// renderedOf is the releases of an apply as it rendered them, in its
// order; nil when one was not rendered (its fast path found nothing moved),
// and the wait must render the selection again for its identities.
func renderedOf(releases []AppliedRelease) []*render.Release {
	out := make([]*render.Release, 0, len(releases))
	for _, r := range releases {
		if r.rendered == nil {
			return nil
		}
		out = append(out, r.rendered)
	}
	return out
}

// changeSource is where a change applied from dir comes from: the git
// state of dir (nothing when it is not in a repository, or git is not
// installed), the CI run, and who applied it (actor).
func changeSource(ctx context.Context, dir, runURL, actor string) *inventory.Source {
	src := &inventory.Source{RunURL: runURL, Actor: actor}
	if st, err := gitref.StateOf(ctx, dir); err == nil {
		src.Commit, src.Ref, src.Dirty = st.Commit, st.Ref, st.Dirty
	}
	return src
}

// Actor is who runs an apply, as its change records it, with the
// environment read through getenv: GitHub's actor in GitHub Actions (the
// login that triggered the run), else the local user and host as a lock
// holder is named. ApplyOptions.Actor, when empty, is Actor(os.Getenv).
func Actor(getenv func(string) string) string {
	if a := getenv("GITHUB_ACTOR"); a != "" {
		return a
	}
	return lock.HolderFrom(getenv)
}

// releaseOp runs one operation on one release.
type releaseOp func(ctx context.Context, cl *kube.Cluster, rel *render.Release) (*reconcile.Result, error)

// eachRelease renders the selection and runs op on each release, in order,
// stopping at the first failure; done (if set) gets each release's result.
// fps are the releases' input fingerprints by key (nil: none), recorded
// with each release and its cached identity.
func eachRelease(ctx context.Context, sel Selection, fps map[string]string, co ClusterOptions, operation string, done func(AppliedRelease), op releaseOp) (*ApplyResult, error) {
	rels, err := render.Render(ctx, sel.RenderOptions(ctx))
	if err != nil {
		return nil, err
	}
	cls := newClusters(ctx, co)
	cache, keys := newIdentityCache(), identityKeys(ctx, sel, fps)
	defer func() { _ = cache.c.Trim() }() // at most hourly: one policy for every kind
	res := &ApplyResult{Releases: make([]AppliedRelease, 0, len(rels))}
	for _, rel := range rels {
		rel.Fingerprint = fps[rel.Key]
		cache.put(keys[rel.Key], rel)
		// The cluster may re-scope objects, and with them the digest: the
		// result reports the release as it is applied.
		cl, scoped, err := cls.forRelease(ctx, rel)
		ar := AppliedRelease{
			RenderedRelease: newRenderedRelease(rel).masked(), Operation: operation, key: rel.Key, rendered: rel,
			Changes: reconcile.NoChanges(),
		}
		if cl != nil {
			ar.Cluster = ClusterRef{Server: cl.Server, Context: cl.Context}
		}
		if err == nil {
			var r *reconcile.Result
			r, err = op(ctx, cl, rel)
			if r != nil {
				ar.fill(r)
				ar.redactReasons(rel)
				ar.orderHidden(redact.From(ctx))
			}
			err = traceRefusal(rel, err)
			ar.Warnings = append(append(slices.Clone(rel.Warnings), scoped...), ar.Warnings...)
		}
		if err = redactRefusal(rel, asIdentity(cl, err)); err != nil {
			ar.Error = err.Error()
		}
		res.Releases = append(res.Releases, ar)
		if done != nil {
			done(ar)
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// RolloutRelease is what a rollout reads of the release to offer its
// rollback.
func (ar AppliedRelease) RolloutRelease() rollout.Release {
	return rollout.Release{Name: ar.Name, ChangeID: ar.ChangeID, Previous: ar.Inventory.Previous, Written: ar.Inventory.Written, Sensitive: ar.Sensitive}
}

func (ar *AppliedRelease) fill(r *reconcile.Result) {
	ar.DryRun = r.DryRun
	ar.Changes = r.Changes
	ar.Inventory = r.Inventory
	ar.Counts = r.Counts
	ar.DurationSeconds = r.Duration.Seconds()
	ar.Warnings = r.Warnings
	ar.InputsIdentical = r.InputsIdentical
}

// String names the cluster as the summary does: context and server URL.
func (c ClusterRef) String() string {
	if c.Context == "" {
		return c.Server
	}
	return fmt.Sprintf("context %s (%s)", c.Context, c.Server)
}
