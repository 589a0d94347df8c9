package pipeline

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/values"
)

// The steps of a smoke test, in order.
const (
	SmokeApply      = "apply"
	SmokeHealthy    = "healthy"
	SmokeIdempotent = "idempotent"
	SmokeDelete     = "delete"
	SmokeClean      = "clean"
)

var smokeSteps = []string{SmokeApply, SmokeHealthy, SmokeIdempotent, SmokeDelete, SmokeClean}

// SmokeSteps are a smoke test's steps, in the order they run.
func SmokeSteps() []string { return slices.Clone(smokeSteps) }

// Step states.
const (
	StepRunning = "running"
	StepPassed  = "passed"
	StepFailed  = "failed"
	StepSkipped = "skipped"
)

// SmokeNamespaceLabel marks the namespaces Smoke creates, so leftovers of
// --keep runs can be found: kubectl get ns -l opmodel.dev/smoke.
const SmokeNamespaceLabel = "opmodel.dev/smoke"

// DefaultSmokeTimeout bounds the wait for health when none is given.
const DefaultSmokeTimeout = 5 * time.Minute

// maxSmokeEvents caps the Events a failed release reports.
const maxSmokeEvents = 20

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

// SmokeProgress is one step of one release starting or ending.
type SmokeProgress struct {
	Release   string
	Namespace string
	Step      SmokeStep
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

// SmokeRelease is one release's smoke test.
type SmokeRelease struct {
	Name        string `json:"name"`
	Environment string `json:"environment,omitempty"`
	// Namespace is the throwaway namespace; OriginalNamespace the one the
	// release deploys to normally.
	Namespace         string `json:"namespace"`
	OriginalNamespace string `json:"originalNamespace"`
	// ReleaseID is the release's identity in the throwaway namespace.
	ReleaseID      string      `json:"releaseId,omitempty"`
	ManifestDigest string      `json:"manifestDigest,omitempty"`
	ChangeID       string      `json:"changeId,omitempty"`
	Objects        int         `json:"objects"`
	Steps          []SmokeStep `json:"steps"`
	Passed         bool        `json:"passed"`
	// FailedStep names the step that failed; empty when passed.
	FailedStep string `json:"failedStep,omitempty"`
	// Unhealthy are the objects not Current when the health step failed,
	// with their conditions.
	Unhealthy []SmokeObject `json:"unhealthy,omitempty"`
	// Events are the namespace's most recent Events after a failure.
	Events []SmokeEvent `json:"events,omitempty"`
	// Changes are what a second apply would change (idempotence failed).
	Changes Compared `json:"changes,omitempty"`
	// Leftovers are the release's objects still found after delete.
	Leftovers []ObjectRef `json:"leftovers,omitempty"`
	// Cleanup says what was done with the namespace and, after a failure,
	// with the objects created.
	Cleanup  string   `json:"cleanup"`
	Warnings []string `json:"warnings,omitempty"`
}

// SmokeStep is one timed step.
type SmokeStep struct {
	Name            string  `json:"name"`
	State           string  `json:"state"`
	DurationSeconds float64 `json:"durationSeconds"`
	// Detail is a one-line account: counts when passed, the error when failed.
	Detail string `json:"detail,omitempty"`
}

// SmokeObject is an unhealthy object and its conditions.
type SmokeObject struct {
	ObjectRef
	Health     health.Status    `json:"health"`
	Reason     string           `json:"reason,omitempty"`
	Conditions []SmokeCondition `json:"conditions,omitempty"`
}

// SmokeCondition is one status condition.
type SmokeCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// SmokeEvent is one Kubernetes Event, message masked.
type SmokeEvent struct {
	Object   string `json:"object"`
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	Count    int32  `json:"count,omitempty"`
	LastSeen string `json:"lastSeen,omitempty"`
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
		if prefixes[rel.Key], err = smokePrefix(opts.NamespacePrefix, rel); err != nil {
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
		if err := refuseRealCluster(ctx, opts, cl, rels); err != nil {
			return nil, err
		}
	}
	if err := cl.Ping(ctx); err != nil {
		return nil, err
	}
	res := &SmokeResult{Environment: opts.Environment, Cluster: ClusterRef{Server: cl.Server, Context: cl.Context}, Passed: true, Releases: []SmokeRelease{}}
	var errs []error
	for _, rel := range rels {
		sr, err := smokeRelease(ctx, opts, cl, rel, prefixes[rel.Key])
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

// refuseRealCluster stops a smoke test from landing on an environment's
// own cluster: by context name, or by server URL when the environment's
// context resolves in the same kubeconfig.
func refuseRealCluster(ctx context.Context, opts SmokeOptions, cl *kube.Cluster, rels []*render.Release) error {
	for _, r := range rels {
		kc := r.Cluster.KubeContext
		if kc == "" {
			continue
		}
		const hint = "a smoke test deploys and deletes releases: point --kubeconfig/--context at a throwaway cluster (kind, k3s), or pass --i-know-this-is-a-real-cluster"
		if cl.Context == kc {
			return fault.Validationf("refusing to smoke-test release %s on context %q: it is environment %q's own kubeContext; %s", r.Name, kc, r.Environment, hint)
		}
		sel := opts.kubeSelection()
		sel.Context = ""
		own, err := kube.Connect(ctx, sel, kube.EnvCluster{Name: r.Environment, KubeContext: kc, KubeConfig: r.Cluster.KubeConfig}, kube.Options{})
		if err == nil && own.Server == cl.Server {
			return fault.Validationf("refusing to smoke-test release %s on %s: its server is that of environment %q's own kubeContext %q; %s", r.Name, cl, r.Environment, kc, hint)
		}
	}
	return nil
}

// smokeRun carries one release's test.
type smokeRun struct {
	opts   SmokeOptions
	cl     *kube.Cluster
	sel    Selection
	co     ClusterOptions
	sr     *SmokeRelease
	secret []string // Secret values to mask in free text
	// derived are the release's secrets and what they derive into, masked
	// where a refusal quotes a value, however short (values.RedactQuoted).
	derived []string
}

func smokeRelease(ctx context.Context, opts SmokeOptions, cl *kube.Cluster, rel *render.Release, prefix string) (SmokeRelease, error) {
	sr := SmokeRelease{Name: rel.Name, Environment: rel.Environment, OriginalNamespace: rel.Namespace, Steps: []SmokeStep{}}
	for _, s := range smokeSteps {
		sr.Steps = append(sr.Steps, SmokeStep{Name: s, State: StepSkipped})
	}
	run := &smokeRun{opts: opts, cl: cl, sr: &sr, secret: secretValues(rel), derived: rel.Secrets}
	ns, err := createSmokeNamespace(ctx, cl, prefix, rel.Name)
	if err != nil {
		sr.FailedStep = SmokeApply
		sr.Steps[0] = SmokeStep{Name: SmokeApply, State: StepFailed, Detail: err.Error()}
		sr.Cleanup = "nothing was created"
		return sr, hardError(err)
	}
	sr.Namespace = ns
	run.sel = opts.Selection
	run.sel.Releases = []string{rel.Key}
	run.sel.NamespaceOverride = ns
	run.co = opts.ClusterOptions
	if !opts.ownCluster {
		run.co.Context = cl.Context
		run.co.ignoreEnvironment = true
	}

	checks := []func(context.Context) (string, error){run.apply, run.healthy, run.idempotent, run.delete, run.clean}
	var stepErr error
	for i, check := range checks {
		if stepErr = run.step(ctx, i, check); stepErr != nil {
			break
		}
	}
	sr.Passed = sr.FailedStep == ""
	if !sr.Passed {
		sr.Events = run.events(ctx)
	}
	run.cleanup(ctx)
	return sr, hardError(stepErr)
}

// hardError keeps the errors a front door maps to their own exit codes
// (an unreachable cluster, missing permissions); a failed check is not one.
func hardError(err error) error {
	if k := fault.KindOf(err); k == fault.Connectivity || k == fault.Permission {
		return err
	}
	return nil
}

func (r *smokeRun) step(ctx context.Context, i int, check func(context.Context) (string, error)) error {
	s := &r.sr.Steps[i]
	s.State = StepRunning
	if r.opts.OnStep != nil {
		r.opts.OnStep(SmokeProgress{Release: r.sr.Name, Namespace: r.sr.Namespace, Step: *s})
	}
	start := time.Now()
	detail, err := check(ctx)
	s.DurationSeconds = time.Since(start).Seconds()
	s.State, s.Detail = StepPassed, r.mask(detail)
	if err != nil {
		s.State, s.Detail = StepFailed, r.mask(err.Error())
		r.sr.FailedStep = s.Name
	}
	if r.opts.OnStep != nil {
		r.opts.OnStep(SmokeProgress{Release: r.sr.Name, Namespace: r.sr.Namespace, Step: *s})
	}
	return err
}

func (r *smokeRun) apply(ctx context.Context) (string, error) {
	res, err := applyEnvironment(ctx, ApplyOptions{Selection: r.sel, ClusterOptions: r.co}, nil)
	if res != nil && len(res.Releases) == 1 {
		a := res.Releases[0]
		r.sr.ReleaseID, r.sr.ManifestDigest, r.sr.ChangeID, r.sr.Objects = a.ReleaseID, a.ManifestDigest, a.ChangeID, len(a.Resources)
		c := a.Counts
		if err == nil {
			return fmt.Sprintf("%d created, %d configured, %d unchanged", c.Created, c.Configured, c.Unchanged), nil
		}
	}
	if err == nil {
		err = errors.New("apply returned no release")
	}
	return "", err
}

func (r *smokeRun) healthy(ctx context.Context) (string, error) {
	timeout := cmp.Or(r.opts.Timeout, DefaultSmokeTimeout)
	res, err := Status(ctx, StatusOptions{Target: Target{Selection: r.sel}, ClusterOptions: r.co, Wait: true, Timeout: timeout, Interval: r.opts.Interval})
	if res == nil {
		return "", err
	}
	n := 0
	for _, rs := range res.Releases {
		for _, c := range rs.Components {
			for _, o := range c.Objects {
				n++
				if o.Health != health.Current {
					r.sr.Unhealthy = append(r.sr.Unhealthy, r.describe(ctx, o))
				}
			}
		}
	}
	if err != nil {
		return "", err
	}
	if !res.Healthy {
		return "", fmt.Errorf("%d of %d objects are not healthy", len(r.sr.Unhealthy), n)
	}
	return fmt.Sprintf("%d objects Current", n), nil
}

func (r *smokeRun) idempotent(ctx context.Context) (string, error) {
	cs, err := Diff(ctx, DiffOptions{Selection: r.sel, ClusterOptions: r.co})
	if err != nil {
		return "", err
	}
	for _, rc := range cs.Releases {
		for _, o := range rc.Objects {
			if o.Action != Unchanged {
				r.sr.Changes = append(r.sr.Changes, o)
			}
		}
	}
	c := cs.Counts
	if c.Changed() || c.Ghost > 0 {
		return "", fmt.Errorf("a second apply would change %d objects (%d added, %d modified, %d stale, %d ghost): the release does not converge", len(r.sr.Changes), c.Added, c.Modified, c.Stale, c.Ghost)
	}
	return fmt.Sprintf("%d objects unchanged", c.Unchanged), nil
}

func (r *smokeRun) deleteRelease(ctx context.Context) (*DeleteResult, error) {
	return Delete(ctx, DeleteOptions{
		Target: Target{Selection: r.sel}, ClusterOptions: r.co, Wait: true,
		// Everything in the throwaway namespace is the test's own.
		Protection: Protection{PruneNamespaces: true, PrunePVCs: true},
	})
}

func (r *smokeRun) delete(ctx context.Context) (string, error) {
	res, err := r.deleteRelease(ctx)
	if err != nil {
		return "", err
	}
	deleted, skipped := 0, 0
	for _, d := range res.Releases {
		deleted += len(d.Deleted)
		skipped += len(d.Skipped)
		if len(d.Skipped) > 0 {
			return "", fmt.Errorf("delete skipped %d objects: %s", len(d.Skipped), strings.Join(d.Warnings, "; "))
		}
	}
	return fmt.Sprintf("%d objects deleted, inventory deleted", deleted), nil
}

// clean checks that delete left nothing: no inventory Secret, and no object
// with the release's labels.
func (r *smokeRun) clean(ctx context.Context) (string, error) {
	inv, err := inventory.Find(ctx, r.cl.Clientset, r.sr.Namespace, r.sr.Name, r.sr.ReleaseID)
	if err != nil {
		return "", fmt.Errorf("looking for the inventory after delete: %w", err)
	}
	var left []string
	if inv != nil {
		left = append(left, "the inventory Secret")
	}
	objs, stats, err := discover.ByLabels(ctx, r.cl, discover.Query{Namespace: r.sr.Namespace, ReleaseName: r.sr.Name, ReleaseID: r.sr.ReleaseID}, discover.Options{})
	if err != nil {
		return "", fmt.Errorf("scanning for the release's objects after delete: %w", err)
	}
	for _, e := range discover.Entries(objs) {
		ref := e.Ref()
		r.sr.Leftovers = append(r.sr.Leftovers, ref)
		left = append(left, ref.String())
	}
	if len(left) > 0 {
		return "", fmt.Errorf("delete left %d things behind: %s", len(left), strings.Join(left, ", "))
	}
	return fmt.Sprintf("no inventory, no labelled object (%d types scanned)", stats.Types), nil
}

// cleanup deletes what a failed test created and the namespace, unless Keep.
func (r *smokeRun) cleanup(ctx context.Context) {
	// Cleanup runs even when the test was cancelled or timed out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	ns := r.sr.Namespace
	if r.opts.Keep {
		if r.sr.Passed {
			r.sr.Cleanup = fmt.Sprintf("namespace %s kept (--keep)", ns)
		} else {
			r.sr.Cleanup = fmt.Sprintf("namespace %s and everything in it kept (--keep): kubectl -n %s get all", ns, ns)
		}
		return
	}
	var notes []string
	if !r.sr.Passed && slices.Index(smokeSteps, r.sr.FailedStep) < slices.Index(smokeSteps, SmokeDelete) {
		if res, err := r.deleteRelease(ctx); err != nil {
			notes = append(notes, "deleting the release failed: "+r.mask(err.Error()))
		} else if len(res.Releases) == 1 && !res.Releases[0].NothingToDelete {
			notes = append(notes, fmt.Sprintf("release deleted (%d objects)", len(res.Releases[0].Deleted)))
		}
	}
	bg := metav1.DeletePropagationBackground
	err := r.cl.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg})
	switch {
	case err == nil || apierrors.IsNotFound(err):
		notes = append(notes, fmt.Sprintf("namespace %s deleted", ns))
	default:
		notes = append(notes, fmt.Sprintf("deleting namespace %s failed: %v", ns, err))
	}
	r.sr.Cleanup = strings.Join(notes, "; ")
}

// describe adds an unhealthy object's status conditions.
func (r *smokeRun) describe(ctx context.Context, o ObjectStatus) SmokeObject {
	so := SmokeObject{ObjectRef: o.ObjectRef, Health: o.Health, Reason: r.mask(o.Reason)}
	m, err := r.cl.Mapper.RESTMapping(schema.GroupKind{Group: o.Group, Kind: o.Kind}, o.Version)
	if err != nil {
		return so
	}
	ri := r.cl.Dynamic.Resource(m.Resource)
	var u *unstructured.Unstructured
	if o.Namespace != "" {
		u, err = ri.Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	} else {
		u, err = ri.Get(ctx, o.Name, metav1.GetOptions{})
	}
	if err != nil {
		return so
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := cm[k].(string); return r.mask(s) }
		so.Conditions = append(so.Conditions, SmokeCondition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")})
	}
	return so
}

// events returns the namespace's most recent Events: the namespace is the
// test's own, so they are all about the release and what its controllers made.
func (r *smokeRun) events(ctx context.Context) []SmokeEvent {
	if r.sr.Namespace == "" {
		return nil
	}
	list, err := r.cl.Clientset.CoreV1().Events(r.sr.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.sr.Warnings = append(r.sr.Warnings, "listing events failed: "+err.Error())
		return nil
	}
	evs := list.Items
	slices.SortStableFunc(evs, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	if len(evs) > maxSmokeEvents {
		evs = evs[len(evs)-maxSmokeEvents:]
	}
	out := make([]SmokeEvent, 0, len(evs))
	for _, e := range evs {
		obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
		se := SmokeEvent{Object: obj, Type: e.Type, Reason: e.Reason, Message: r.mask(e.Message), Count: e.Count}
		if t := eventTime(e); !t.IsZero() {
			se.LastSeen = t.UTC().Format(time.RFC3339)
		}
		out = append(out, se)
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// mask replaces the release's Secret values in free text (errors,
// conditions, Events) with the marker the diffs use.
func (r *smokeRun) mask(s string) string {
	s = values.RedactQuoted(s, r.derived) // as every command masks refusals
	for _, v := range r.secret {
		s = strings.ReplaceAll(s, v, "(masked)")
	}
	return s
}

// minMaskLength skips values so short that masking them would garble
// every message (a one-letter value occurs everywhere).
const minMaskLength = 4

// secretValues collects the rendered Secrets' values, decoded and encoded,
// longest first so a value containing another is masked whole.
func secretValues(rel *render.Release) []string {
	var out []string
	add := func(v string) {
		if len(v) >= minMaskLength && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, res := range rel.Resources {
		if res.Object.GetKind() != "Secret" || res.Object.GroupVersionKind().Group != "" {
			continue
		}
		data, _, _ := unstructured.NestedMap(res.Object.Object, "data")
		for _, v := range data {
			s, _ := v.(string)
			add(s)
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				add(string(b))
			}
		}
		sd, _, _ := unstructured.NestedMap(res.Object.Object, "stringData")
		for _, v := range sd {
			s, _ := v.(string)
			add(s)
			add(base64.StdEncoding.EncodeToString([]byte(s)))
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// createSmokeNamespace creates prefix-release-<5 random characters>, so
// parallel runs never share a namespace.
// smokePrefix starts the names of rel's throwaway namespaces: the given
// prefix (default "opm-smoke"), or, where the environment allows only some
// namespaces (namespaces.allowed), the fixed start of an allowed glob
// followed by "smoke" ("team-a-*" gives "team-a-smoke"), so the test
// deploys where the release may write. An environment whose patterns
// admit no throwaway name is refused, saying which pattern to add.
func smokePrefix(given string, rel *render.Release) (string, error) {
	prefix := cmp.Or(given, "opm-smoke")
	probe := func(p string) bool {
		return rel.Reach.Allows(strings.Trim(p+"-"+rel.Name, "-") + "-bcdfg")
	}
	// Without namespaces.allowed a release may write its own namespace,
	// which the smoke test replaces by the throwaway one.
	if rel.Reach == nil || !rel.Reach.Explicit || probe(prefix) {
		return prefix, nil
	}
	if given == "" {
		for _, glob := range rel.Reach.Namespaces {
			if start, ok := strings.CutSuffix(glob, "*"); ok && !strings.ContainsAny(start, "*?[") {
				if p := start + "smoke"; probe(p) {
					return p, nil
				}
			}
		}
	}
	return "", fault.Validationf("environment %q lets release %s write only into %s, and a smoke test's throwaway namespace %s-%s-… is none of them: add a pattern for throwaway namespaces to its namespaces.allowed, e.g. %q, or pass a --namespace-prefix one of them admits",
		rel.Environment, rel.Name, strings.Join(rel.Reach.Namespaces, ", "), prefix, rel.Name, rel.Namespace+"-smoke-*")
}

func createSmokeNamespace(ctx context.Context, cl *kube.Cluster, prefix, release string) (string, error) {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	for range 3 {
		suffix := make([]byte, 5)
		for i := range suffix {
			n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
			if err != nil {
				return "", err
			}
			suffix[i] = alphabet[n.Int64()]
		}
		base := strings.Trim(prefix+"-"+release, "-")
		if len(base) > 57 {
			base = strings.TrimRight(base[:57], "-")
		}
		name := base + "-" + string(suffix)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{SmokeNamespaceLabel: "true"}}}
		_, err := cl.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		switch {
		case err == nil:
			return name, nil
		case apierrors.IsAlreadyExists(err):
			continue
		case apierrors.IsForbidden(err):
			return "", fault.Wrap(fault.Permission, fmt.Errorf("creating throwaway namespace %s on %s: %w", name, cl, err))
		case apierrors.IsInvalid(err):
			return "", fault.Wrap(fault.Validation, fmt.Errorf("creating throwaway namespace %s: %w (choose a shorter or valid --namespace-prefix)", name, err))
		default:
			return "", fault.Wrap(fault.Connectivity, fmt.Errorf("creating throwaway namespace %s on %s: %w", name, cl, err))
		}
	}
	return "", fmt.Errorf("creating a throwaway namespace: three random names were taken")
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
