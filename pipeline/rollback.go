package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/rollout"
	"github.com/opmodel/pipeline/pipeline/snapshot"
)

// RollbackOptions are the options of Rollback. ApplyOptions.Selection
// names the deployment directory (inside a git repository), the
// environment and exactly one release; every other apply option applies
// to the rollback's apply as it would to any apply.
type RollbackOptions struct {
	ApplyOptions
	// To is the change ID to return to.
	To string `json:"to"`
	// AllowDifferentDigest applies the commit's render even when it does
	// not reproduce the manifest digest the change recorded (the catalog,
	// opm or a values file changed since).
	AllowDifferentDigest bool `json:"allowDifferentDigest,omitempty"`
}

// RollbackResult is what Rollback returns: the apply's result plus what
// was rolled back to.
type RollbackResult struct {
	ApplyResult
	// From is the change that was current before the rollback.
	From string `json:"from"`
	To   string `json:"to"`
	// Commit is the commit To recorded, rendered again.
	Commit string `json:"commit"`
	// RecordedDigest is To's manifest digest; RenderedDigest what the
	// commit renders now. They differ only with AllowDifferentDigest.
	RecordedDigest string `json:"recordedDigest"`
	RenderedDigest string `json:"renderedDigest"`
}

// Rollback returns a release to an earlier change: it renders the
// deployment directory as of the commit that change recorded (checked out
// into a temporary git worktree, as a review's base side) and applies that
// render through Apply, as a new change with every guard of apply. It
// refuses (not found) when the change is unknown, recorded no commit, or
// the commit is not in the local repository; and (validation) when the
// render does not reproduce the recorded manifest digest, unless
// AllowDifferentDigest, or when it would deploy to another release
// identity or cluster than the current definition.
func Rollback(ctx context.Context, opts RollbackOptions) (*RollbackResult, error) {
	if err := single(opts.Selection, "rollback"); err != nil {
		return nil, err
	}
	if len(opts.Releases) != 1 {
		return nil, fault.Validationf("rollback needs exactly one release, not %d", len(opts.Releases))
	}
	if opts.To == "" {
		return nil, fault.Validationf("rollback needs the change ID to return to (--to); `opm history` lists them")
	}
	found, err := findInventories(ctx, Target{Selection: opts.Selection}, opts.ClusterOptions)
	if err != nil {
		return nil, err
	}
	cur, inv := found[0].rel, found[0].inv
	if _, ok := inv.Changes[opts.To]; !ok {
		// A sealed change ID, as public outputs show a release that holds
		// secret data, under this run's seal key.
		if id, ok := redact.From(ctx).Unseal(opts.To, inv.Index); ok {
			opts.To = id
		}
	}
	if _, ok := inv.Changes[opts.To]; !ok {
		// A git revision: the newest change applied from that commit.
		if commit, err := resolveRevision(ctx, opts.RenderOptions(ctx).Dir, opts.To); err == nil {
			if id := changeAtCommit(inv, commit); id != "" {
				opts.To = id
			}
		}
	}
	change, ok := inv.Changes[opts.To]
	if !ok {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("release %s has no change or commit %s in its inventory %s/%s; it records: %s",
			cur.Name, opts.To, inv.Namespace(), inv.Name(), strings.Join(inv.Index, ", ")))
	}
	commit := change.Commit()
	if commit == "" {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("change %s of release %s recorded no clean git commit (it was applied from outside a git repository, with uncommitted changes, or by an opm that did not record sources): "+
			"check out the source it was applied from yourself and run opm apply", opts.To, cur.Name))
	}
	dir, err := filepath.Abs(opts.RenderOptions(ctx).Dir)
	if err != nil {
		return nil, fmt.Errorf("finding the deployment directory %s: %w", opts.Dir, err)
	}
	repo, err := gitref.Root(ctx, dir)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, err)
	}
	if _, err := gitref.Resolve(ctx, repo, commit); err != nil {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("change %s of release %s was applied from commit %s, which is not in the local repository %s: fetch it (git fetch origin %s, or clone with full history) and retry: %w",
			opts.To, cur.Name, commit, repo, commit, err))
	}
	snap, err := snapshot.Checkout(ctx, repo, dir, commit)
	if err != nil {
		return nil, err
	}
	defer snap.Close()

	at := opts.ApplyOptions
	at.shownDir = cmp.Or(opts.Selection.Dir, ".")
	at.Selection.Dir = snap.Dir()
	rels, err := render.Render(ctx, at.RenderOptions(ctx))
	if err != nil {
		return nil, fmt.Errorf("rendering release %s at commit %s: %w", cur.Name, gitref.Short(commit), err)
	}
	rel := rels[0]
	res := &RollbackResult{To: opts.To, Commit: commit, RecordedDigest: change.ManifestDigest, RenderedDigest: rel.ManifestDigest}
	res.From, _, _ = inv.Latest()
	switch {
	case rel.ReleaseID != cur.ReleaseID || rel.Namespace != cur.Namespace:
		return nil, fault.Validationf("at commit %s release %s is %s in namespace %s, but now it is %s in namespace %s: a rollback cannot move a release; apply that commit yourself if that is intended",
			gitref.Short(commit), cur.Name, rel.ReleaseID, rel.Namespace, cur.ReleaseID, cur.Namespace)
	case !rel.Cluster.Equal(cur.Cluster):
		return nil, fault.Validationf("at commit %s environment %s selects another cluster (%+v) than it does now (%+v): a rollback applies only to the cluster the release is on now",
			gitref.Short(commit), cmp.Or(rel.Environment, "-"), rel.Cluster, cur.Cluster)
	case rel.ManifestDigest != change.ManifestDigest && !opts.AllowDifferentDigest:
		return nil, fault.Validationf("commit %s renders release %s with manifest digest %s, but change %s recorded %s: the catalog, opm or a values file changed since, so this would not restore exactly what ran; "+
			"compare with `opm review --base %s`, and pass --allow-different-digest to apply it anyway", gitref.Short(commit), cur.Name, rel.ManifestDigest, opts.To, change.ManifestDigest, gitref.Short(commit))
	}
	// A change this environment ran before is not a promotion: its gates
	// (which hold back commits the earlier environments have not run) do
	// not apply, as Kargo lets a stage return to freight it had. The
	// change records it, as a skipped gate is recorded.
	at.SkipGates = true
	at.SkippedBy = cmp.Or(opts.SkippedBy, "rollback") + " to " + opts.To + ", which this environment ran before"
	applied, err := applyEnvironment(ctx, at, nil)
	if applied != nil {
		res.ApplyResult = *applied
	}
	return res, err
}

// resolveRevision resolves a git revision in the repository of dir.
func resolveRevision(ctx context.Context, dir, rev string) (string, error) {
	abs, err := filepath.Abs(cmp.Or(dir, "."))
	if err != nil {
		return "", err
	}
	repo, err := gitref.Root(ctx, abs)
	if err != nil {
		return "", err
	}
	return gitref.Resolve(ctx, repo, rev)
}

// changeAtCommit is the newest change an inventory records as applied
// from commit with a clean checkout, or "".
func changeAtCommit(inv *inventory.Inventory, commit string) string {
	for _, id := range inv.Index {
		if inv.Changes[id].RanAt(commit) {
			return id
		}
	}
	return ""
}

// Fleet rollback results, beside Rollout's.
const (
	RolloutRolledBack   = rollout.RolledBack
	RolloutAlreadyThere = rollout.AlreadyThere
)

// RollbackFleet returns every environment of a fleet selection (a group,
// a comma list) to a git revision, To: each release goes back to the
// newest change its inventory records from that commit. Nothing is
// written unless every selected release in every environment ran that
// commit before (as Kargo only lets a stage return to freight it had);
// then the waves go back in reverse order, the last wave first, each
// waited for until healthy (Timeout) before the one before it, so an
// environment never runs an older commit than one it gates. Releases
// already at the commit are left alone. The first failure stops it.
func RollbackFleet(ctx context.Context, opts RollbackOptions, timeout time.Duration) (*RolloutResult, error) {
	if opts.To == "" {
		return nil, fault.Validationf("rolling back a fleet needs the git commit to return to (--to): `opm status --group …` shows which commit runs where, `opm history` what each ran")
	}
	envs, err := Fleet(ctx, opts.Selection)
	if err != nil {
		return nil, err
	}
	commit, err := resolveRevision(ctx, opts.RenderOptions(ctx).Dir, opts.To)
	if err != nil {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("rolling back a fleet to %s: %w; a fleet goes back to a git commit (change IDs are per release and environment)", opts.To, err))
	}
	// Plan: every release of every environment must have run the commit:
	// its record says so (the change's first apply or a later sighting), or
	// the commit renders a change its history holds (a commit that left the
	// release as it was, seen longer ago than the record keeps).
	plan := map[string][]rollout.Move{}
	var missing []string
	var unrecorded []unrecordedRelease
	for i, e := range envs {
		found, err := findInventories(ctx, Target{Selection: opts.Selection.ForEnvironment(e.Name)}, opts.ClusterOptions)
		if err != nil {
			return nil, fmt.Errorf("environment %s: %w", e.Name, err)
		}
		for _, f := range found {
			if id := changeAtCommit(f.inv, commit); id != "" {
				if cur, _, _ := f.inv.Latest(); id != cur {
					plan[e.Name] = append(plan[e.Name], rollout.Move{Release: f.rel.Key, To: id})
				}
				continue
			}
			unrecorded = append(unrecorded, unrecordedRelease{env: i, found: f})
		}
	}
	if len(unrecorded) > 0 {
		ids, err := changesAtCommit(ctx, opts.ApplyOptions, envs, commit, unrecorded)
		if err != nil {
			return nil, err
		}
		for k, u := range unrecorded {
			f, e := u.found, envs[u.env]
			id := ids[k]
			if _, ok := f.inv.Changes[id]; !ok {
				missing = append(missing, fmt.Sprintf("%s in %s (it ran: %s)", f.rel.Name, e.Name, ranCommits(f.inv)))
				continue
			}
			if cur, _, _ := f.inv.Latest(); id != cur {
				plan[e.Name] = append(plan[e.Name], rollout.Move{Release: f.rel.Key, To: id})
			}
		}
	}
	if len(missing) > 0 {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("nothing was rolled back: these releases never ran commit %s, so there is nothing to return them to:\n  %s\nchoose a commit every environment of the selection ran (opm status --group shows the current ones), or roll back environments one at a time (opm rollback RELEASE --env ENV --to CHANGE)",
			gitref.Short(commit), strings.Join(missing, "\n  ")))
	}
	rerun := fmt.Sprintf("opm rollback %s --group %s --to %s", rollout.ShellQuote(cmp.Or(opts.Dir, ".")), cmp.Or(opts.Group, opts.Environment), opts.To)
	return rollout.Back[AppliedRelease, SmokeResult](ctx, envs, plan, backSteps{opts}, rollout.BackOptions{DryRun: opts.DryRun, Timeout: timeout, Rerun: rerun})
}

// backSteps are what a fleet's rollback does to one environment.
type backSteps struct{ opts RollbackOptions }

// Back rolls one release of env back, as Rollback.
func (b backSteps) Back(ctx context.Context, env FleetEnvironment, m rollout.Move) ([]AppliedRelease, error) {
	o := b.opts
	o.Selection = b.opts.Selection.ForEnvironment(env.Name)
	o.Releases, o.To = []string{m.Release}, m.To
	rr, err := Rollback(ctx, o)
	if rr == nil {
		return nil, err
	}
	return rr.Releases, err
}

// WaitHealthy waits for env as it runs now, rendered again.
func (b backSteps) WaitHealthy(ctx context.Context, env FleetEnvironment, timeout time.Duration) (bool, string) {
	healthy, why, _ := waitHealthy(ctx, b.opts.ClusterOptions, b.opts.Selection.ForEnvironment(env.Name), timeout, rollout.Narration{}, nil)
	return healthy, why
}

// unrecordedRelease is a release of envs[env] whose inventory records no
// apply from the commit a fleet goes back to.
type unrecordedRelease struct {
	env   int
	found foundInventory
}

// changesAtCommit renders each unrecorded release as of commit (one
// checkout for all) and returns the change ID each would have there, in
// order; a release the commit does not declare gets "".
func changesAtCommit(ctx context.Context, opts ApplyOptions, envs []FleetEnvironment, commit string, us []unrecordedRelease) ([]string, error) {
	dir, err := filepath.Abs(opts.RenderOptions(ctx).Dir)
	if err != nil {
		return nil, fmt.Errorf("finding the deployment directory %s: %w", opts.Dir, err)
	}
	repo, err := gitref.Root(ctx, dir)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, err)
	}
	snap, err := snapshot.Checkout(ctx, repo, dir, commit)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	ids := make([]string, len(us))
	for k, u := range us {
		at := opts
		at.Selection = opts.Selection.ForEnvironment(envs[u.env].Name)
		at.Selection.Dir = snap.Dir()
		at.Releases = []string{u.found.rel.Key}
		rels, err := render.Render(ctx, at.RenderOptions(ctx))
		if fault.KindOf(err) == fault.Validation && len(rels) == 0 {
			continue // not declared at that commit: it never ran it
		}
		if err != nil {
			return nil, fmt.Errorf("rendering release %s of environment %s at commit %s: %w", u.found.rel.Name, envs[u.env].Name, gitref.Short(commit), err)
		}
		if len(rels) == 1 {
			ids[k] = rels[0].ChangeID
		}
	}
	return ids, nil
}

// ranCommits lists the commits an inventory's changes came from, newest
// first, for a refusal that says what could be chosen instead.
func ranCommits(inv *inventory.Inventory) string {
	var out []string
	for _, id := range inv.Index {
		c := inv.Changes[id]
		for _, s := range append([]inventory.Sighting{c.FirstApplied()}, c.Seen...) {
			if s.Commit != "" && !slices.Contains(out, gitref.Short(s.Commit)) {
				out = append(out, gitref.Short(s.Commit))
			}
		}
	}
	if len(out) == 0 {
		return "no recorded commit"
	}
	return strings.Join(out, ", ")
}
