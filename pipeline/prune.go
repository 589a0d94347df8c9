package pipeline

import (
	"context"
	"fmt"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/render"
)

// PruneOptions are the options of Prune.
type PruneOptions struct {
	Selection
	ClusterOptions
	// DryRun sends the deletes as server-side dry runs and writes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	Protection
	Locking
	// Ghosts also prunes ghosts: objects carrying the release's id that
	// are neither recorded nor rendered (diff's ghost set).
	Ghosts bool `json:"ghosts,omitempty"`
	// Force lets an empty render prune a whole release.
	Force bool `json:"force,omitempty"`
	// Concurrency bounds parallel deletes per weight; 8 when zero.
	Concurrency int `json:"concurrency,omitempty"`
	// Progress receives one event per stale object, never concurrently.
	Progress func(ProgressEvent) `json:"-"`
	// ReleaseDone receives each release's result as soon as it is done.
	ReleaseDone func(AppliedRelease) `json:"-"`
}

// Prune renders the selected releases and deletes each one's stale set —
// what its inventory's latest change records that the render no longer
// produces — without applying anything, with apply's protections. The
// inventory is rewritten without the objects deleted; skipped ones stay.
// A release without an inventory has nothing to prune (a warning).
//
// A fleet selection (a group, a comma list) prunes each environment in
// wave order; the first failure stops it.
func Prune(ctx context.Context, opts PruneOptions) (*ApplyResult, error) {
	return routed(ctx, opts.Selection,
		func() (*ApplyResult, error) { return prune(ctx, opts) },
		func(envs []FleetEnvironment) (*ApplyResult, error) { return pruneFleet(ctx, opts, envs) })
}

func pruneFleet(ctx context.Context, opts PruneOptions, envs []FleetEnvironment) (*ApplyResult, error) {
	out := &ApplyResult{}
	for _, e := range envs {
		o := opts
		o.Selection = opts.Selection.ForEnvironment(e.Name)
		r, err := prune(ctx, o)
		if r != nil {
			out.Releases = append(out.Releases, r.Releases...)
		}
		if err != nil {
			return out, fmt.Errorf("environment %s (wave %d): %w; later environments were not pruned", e.Name, e.Wave, err)
		}
	}
	return out, nil
}

func prune(ctx context.Context, opts PruneOptions) (*ApplyResult, error) {
	ro := reconcile.Options{
		DryRun: opts.DryRun, PruneNamespaces: opts.PruneNamespaces, PrunePVCs: opts.PrunePVCs, PruneCRDs: opts.PruneCRDs,
		Force: opts.Force, Concurrency: opts.Concurrency, Progress: opts.Progress,
		Lock: opts.Locking.options(), PruneGhosts: opts.Ghosts,
	}
	return eachRelease(ctx, opts.Selection, nil, opts.ClusterOptions, "prune", opts.ReleaseDone, func(ctx context.Context, cl *kube.Cluster, rel *render.Release) (*reconcile.Result, error) {
		o, flush := redactedProgress(ctx, ro, rel)
		defer flush()
		return reconcile.Prune(ctx, cl, rel, o)
	})
}
