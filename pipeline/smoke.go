package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/pipeline/rollout"
)

// The steps of a smoke test, in order.
const (
	SmokeApply      = rollout.SmokeApply
	SmokeHealthy    = rollout.SmokeHealthy
	SmokeIdempotent = rollout.SmokeIdempotent
	SmokeDelete     = rollout.SmokeDelete
	SmokeClean      = rollout.SmokeClean
)

// SmokeSteps are a smoke test's steps, in the order they run.
func SmokeSteps() []string { return rollout.SmokeSteps() }

// Step states.
const (
	StepRunning = rollout.StepRunning
	StepPassed  = rollout.StepPassed
	StepFailed  = rollout.StepFailed
	StepSkipped = rollout.StepSkipped
)

// SmokeNamespaceLabel marks the namespaces Smoke creates, so leftovers of
// --keep runs can be found: kubectl get ns -l opmodel.dev/smoke.
const SmokeNamespaceLabel = rollout.SmokeNamespaceLabel

// DefaultSmokeTimeout bounds the wait for health when none is given.
const DefaultSmokeTimeout = rollout.DefaultSmokeTimeout

// A smoke test's parts, as rollout runs it.
type (
	SmokeProgress  = rollout.SmokeProgress
	SmokeRelease   = rollout.SmokeRelease
	SmokeStep      = rollout.SmokeStep
	SmokeObject    = rollout.SmokeObject
	SmokeCondition = rollout.SmokeCondition
	SmokeEvent     = rollout.SmokeEvent
)

// SmokeOptions are the options of Smoke.
type SmokeOptions struct {
	// Selection picks the releases and environment; NamespaceOverride is
	// ignored: each release gets a throwaway namespace of its own.
	Selection
	// ClusterOptions name the throwaway cluster: Kubeconfig/KubeconfigData
	// and Context, else the kubeconfig's current context. Environments'
	// cluster settings are never used.
	ClusterOptions
	// Timeout bounds the wait until every object is healthy; DefaultSmokeTimeout when zero.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Interval is the health polling interval (default 2s).
	Interval time.Duration `json:"-"`
	// Keep leaves the throwaway namespace, and after a failure everything
	// in it, for inspection.
	Keep bool `json:"keep,omitempty"`
	// NamespacePrefix starts each throwaway namespace's name; "opm-smoke" when empty.
	NamespacePrefix string `json:"namespacePrefix,omitempty"`
	// AllowRealCluster lets the test run on a context whose name or server
	// is an environment's own kubeContext.
	AllowRealCluster bool `json:"allowRealCluster,omitempty"`
	// OnStep hears each step when it starts (State "running") and ends.
	OnStep func(SmokeProgress) `json:"-"`

	// ownCluster runs the test on the environment's own cluster (a
	// rollout's per-wave verification), in a throwaway namespace there.
	ownCluster bool
}

// SmokeResult is what Smoke returns.
type SmokeResult struct {
	Environment string         `json:"environment,omitempty"`
	Cluster     ClusterRef     `json:"cluster"`
	Releases    []SmokeRelease `json:"releases"`
	// Passed is true when every release passed every step.
	Passed          bool    `json:"passed"`
	DurationSeconds float64 `json:"durationSeconds"`
}

// Smoke deploys each selected release to a throwaway namespace of the given
// cluster and checks it: apply → every object healthy (kstatus, within
// Timeout) → a second apply would change nothing (Diff) → delete → no
// inventory and no labelled object left. The first failing step ends the
// release's test; what was created is still deleted unless Keep. The
// namespace is deleted at the end unless Keep.
//
// A failed check is a result with Passed false and a nil error. The error
// is for what stops the test from running: bad input, a refused or
// unreachable cluster.
//
// A fleet selection (a group or a list) tests each environment's
// releases in turn, in rollout order, on the same throwaway cluster.
func Smoke(ctx context.Context, opts SmokeOptions) (*SmokeResult, error) {
	if opts.Selection.IsFleet() {
		return smokeFleet(ctx, opts)
	}
	start := time.Now()
	sel := opts.Selection
	sel.NamespaceOverride = ""
	// Render everything first: bad input is an error (exit 2), not a
	// failed smoke test.
	rels, err := render.Render(ctx, sel.RenderOptions(ctx))
	if err != nil {
		return nil, err
	}
	// The throwaway namespaces must be ones the environment lets its
	// releases write: refused here, before anything runs, if none can be.
	prefixes := make(map[string]string, len(rels))
	for _, rel := range rels {
		if prefixes[rel.Key], err = rollout.SmokePrefix(opts.NamespacePrefix, rel); err != nil {
			return nil, err
		}
	}
	envCluster := kube.EnvCluster{}
	if opts.ownCluster && len(rels) > 0 {
		envCluster = kube.EnvCluster{Name: rels[0].Environment, KubeContext: rels[0].Cluster.KubeContext, KubeConfig: rels[0].Cluster.KubeConfig}
	}
	cl, err := kube.Connect(ctx, opts.kubeSelection(), envCluster, kube.Options{QPS: opts.QPS, Burst: opts.Burst})
	if err != nil {
		return nil, err
	}
	if !opts.AllowRealCluster && !opts.ownCluster {
		if err := rollout.RefuseRealCluster(ctx, opts.kubeSelection(), cl, rels); err != nil {
			return nil, err
		}
	}
	if err := cl.Ping(ctx); err != nil {
		return nil, err
	}
	res := &SmokeResult{Environment: opts.Environment, Cluster: ClusterRef{Server: cl.Server, Context: cl.Context}, Passed: true, Releases: []SmokeRelease{}}
	var errs []error
	for _, rel := range rels {
		test := rollout.SmokeTest{Cluster: cl, Prefix: prefixes[rel.Key], Timeout: opts.Timeout, Interval: opts.Interval, Keep: opts.Keep, OnStep: opts.OnStep, Ops: smokeOpsFor(opts, cl, rel)}
		sr, err := test.Run(ctx, rel)
		res.Releases = append(res.Releases, sr)
		res.Passed = res.Passed && sr.Passed
		if err != nil {
			errs = append(errs, fmt.Errorf("release %s: %w", rel.Name, err))
		}
	}
	res.DurationSeconds = time.Since(start).Seconds()
	return res, errors.Join(errs...)
}

// smokeFleet tests the environments of a fleet one after the other and
// returns one result: every release, each naming its environment.
func smokeFleet(ctx context.Context, opts SmokeOptions) (*SmokeResult, error) {
	envs, err := Fleet(ctx, opts.Selection)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &SmokeResult{Environment: cmp.Or(opts.Group, opts.Environment), Passed: true, Releases: []SmokeRelease{}}
	var errs []error
	for _, e := range envs {
		o := opts
		o.Selection = opts.Selection.ForEnvironment(e.Name)
		r, err := Smoke(ctx, o)
		if r != nil {
			res.Cluster = r.Cluster
			res.Releases = append(res.Releases, r.Releases...)
			res.Passed = res.Passed && r.Passed
		}
		if err != nil {
			if r == nil {
				// Bad input or a refused cluster stops the whole test.
				return nil, fmt.Errorf("environment %s: %w", e.Name, err)
			}
			errs = append(errs, fmt.Errorf("environment %s: %w", e.Name, err))
		}
	}
	res.DurationSeconds = time.Since(start).Seconds()
	return res, errors.Join(errs...)
}

func (o SmokeOptions) kubeSelection() kube.Flags {
	return kube.Flags{Kubeconfig: o.Kubeconfig, KubeconfigData: o.KubeconfigData, Context: o.Context}
}

// smokeOps are a smoke test's operations on one release in its throwaway
// namespace: Apply, Status, Diff and Delete, as the commands run them.
type smokeOps struct {
	sel Selection
	co  ClusterOptions
}

// smokeOpsFor is the operations on rel in namespace ns of cl: on the
// environment's own cluster for a rollout's smoke test, else on cl alone.
func smokeOpsFor(opts SmokeOptions, cl *kube.Cluster, rel *render.Release) func(ns string) rollout.SmokeOps {
	return func(ns string) rollout.SmokeOps {
		o := smokeOps{sel: opts.Selection, co: opts.ClusterOptions}
		o.sel.Releases = []string{rel.Key}
		o.sel.NamespaceOverride = ns
		if !opts.ownCluster {
			o.co.Context = cl.Context
			o.co.ignoreEnvironment = true
		}
		return o
	}
}

func (o smokeOps) Apply(ctx context.Context) (*rollout.SmokeApplied, error) {
	res, err := applyEnvironment(ctx, ApplyOptions{Selection: o.sel, ClusterOptions: o.co}, nil)
	if res == nil || len(res.Releases) != 1 {
		return nil, err
	}
	a := res.Releases[0]
	return &rollout.SmokeApplied{ReleaseID: a.ReleaseID, ManifestDigest: a.ManifestDigest, ChangeID: a.ChangeID, Objects: len(a.Resources),
		Created: a.Counts.Created, Configured: a.Counts.Configured, Unchanged: a.Counts.Unchanged}, err
}

func (o smokeOps) Wait(ctx context.Context, timeout, interval time.Duration) ([]rollout.SmokeHealth, bool, error) {
	res, err := Status(ctx, StatusOptions{Target: Target{Selection: o.sel}, ClusterOptions: o.co, Wait: true, Timeout: timeout, Interval: interval})
	if res == nil {
		return nil, false, err
	}
	objects := []rollout.SmokeHealth{}
	for _, rs := range res.Releases {
		for _, c := range rs.Components {
			for _, ob := range c.Objects {
				objects = append(objects, rollout.SmokeHealth{ObjectRef: ob.ObjectRef, Health: ob.Health, Reason: ob.Reason})
			}
		}
	}
	return objects, res.Healthy, err
}

func (o smokeOps) Diff(ctx context.Context) (*rollout.SmokeDiff, error) {
	cs, err := Diff(ctx, DiffOptions{Selection: o.sel, ClusterOptions: o.co})
	if err != nil {
		return nil, err
	}
	c := cs.Counts
	d := &rollout.SmokeDiff{Added: c.Added, Modified: c.Modified, Unchanged: c.Unchanged, Stale: c.Stale, Ghost: c.Ghost}
	for _, rc := range cs.Releases {
		d.Objects = append(d.Objects, rc.Objects...)
	}
	return d, nil
}

func (o smokeOps) Delete(ctx context.Context) ([]rollout.SmokeDeleted, error) {
	res, err := Delete(ctx, DeleteOptions{
		Target: Target{Selection: o.sel}, ClusterOptions: o.co, Wait: true,
		// Everything in the throwaway namespace is the test's own.
		Protection: Protection{PruneNamespaces: true, PrunePVCs: true},
	})
	if err != nil {
		return nil, err
	}
	out := make([]rollout.SmokeDeleted, 0, len(res.Releases))
	for _, d := range res.Releases {
		out = append(out, rollout.SmokeDeleted{Deleted: len(d.Deleted), Skipped: len(d.Skipped), Warnings: d.Warnings, NothingToDelete: d.NothingToDelete})
	}
	return out, nil
}

// Failed lists the releases that failed, as "name (step)".
func (r *SmokeResult) Failed() []string {
	var out []string
	for _, rel := range r.Releases {
		if !rel.Passed {
			out = append(out, fmt.Sprintf("%s (%s)", rel.Name, rel.FailedStep))
		}
	}
	return out
}
