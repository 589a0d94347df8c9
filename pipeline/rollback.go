package pipeline

import (
	"github.com/opmodel/pipeline/engine/redact"

	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/engine/render"
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
	if err := opts.Selection.single("rollback"); err != nil {
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
	change, ok := inv.Changes[opts.To]
	if !ok {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("release %s has no change %s in its inventory %s/%s; it records: %s",
			cur.Name, opts.To, inv.Namespace(), inv.Name(), strings.Join(inv.Index, ", ")))
	}
	if change.Source == nil || change.Source.Commit == "" {
		return nil, fault.Wrap(fault.NotFound, fmt.Errorf("change %s of release %s recorded no git commit (it was applied from outside a git repository, or by an opm that did not record sources): "+
			"check out the source it was applied from yourself and run opm apply", opts.To, cur.Name))
	}
	commit := change.Source.Commit
	dir, err := filepath.Abs(opts.renderOptions().Dir)
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
	_, atDir, done, err := checkoutDir(ctx, repo, dir, commit)
	if err != nil {
		return nil, err
	}
	defer done()

	at := opts.ApplyOptions
	at.Selection.Dir = atDir
	rels, err := render.Render(ctx, at.renderOptions())
	if err != nil {
		return nil, fmt.Errorf("rendering release %s at commit %s: %w", cur.Name, short(commit), err)
	}
	rel := rels[0]
	res := &RollbackResult{To: opts.To, Commit: commit, RecordedDigest: change.ManifestDigest, RenderedDigest: rel.ManifestDigest}
	res.From, _, _ = inv.Latest()
	switch {
	case rel.ReleaseID != cur.ReleaseID || rel.Namespace != cur.Namespace:
		return nil, fault.Validationf("at commit %s release %s is %s in namespace %s, but now it is %s in namespace %s: a rollback cannot move a release; apply that commit yourself if that is intended",
			short(commit), cur.Name, rel.ReleaseID, rel.Namespace, cur.ReleaseID, cur.Namespace)
	case !rel.Cluster.Equal(cur.Cluster):
		return nil, fault.Validationf("at commit %s environment %s selects another cluster (%+v) than it does now (%+v): a rollback applies only to the cluster the release is on now",
			short(commit), cmp.Or(rel.Environment, "-"), rel.Cluster, cur.Cluster)
	case rel.ManifestDigest != change.ManifestDigest && !opts.AllowDifferentDigest:
		return nil, fault.Validationf("commit %s renders release %s with manifest digest %s, but change %s recorded %s: the catalog, opm or a values file changed since, so this would not restore exactly what ran; "+
			"compare with `opm review --base %s`, and pass --allow-different-digest to apply it anyway", short(commit), cur.Name, rel.ManifestDigest, opts.To, change.ManifestDigest, short(commit))
	}
	// A change this environment ran before is not a promotion: its gates
	// (which hold back commits the earlier environments have not run) do
	// not apply, as Kargo lets a stage return to freight it had. The
	// change records it, as a skipped gate is recorded.
	at.SkipGates = true
	at.SkippedBy = cmp.Or(opts.SkippedBy, "rollback") + " to " + opts.To + ", which this environment ran before"
	applied, err := Apply(ctx, at)
	if applied != nil {
		res.ApplyResult = *applied
	}
	return res, err
}

// short is the first 12 characters of a commit.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
