package rollout

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
	"github.com/opmodel/pipeline/engine/manifest"
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

// ObjectRef names one object.
type ObjectRef = manifest.Ref

// SmokeProgress is one step of one release starting or ending.
type SmokeProgress struct {
	Release   string
	Namespace string
	Step      SmokeStep
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
	Changes manifest.Compared `json:"changes,omitempty"`
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

// RefuseRealCluster stops a smoke test from landing on an environment's
// own cluster: by context name, or by server URL when the environment's
// context resolves in the same kubeconfig (flags, the test's cluster
// selection).
func RefuseRealCluster(ctx context.Context, flags kube.Flags, cl *kube.Cluster, rels []*render.Release) error {
	for _, r := range rels {
		kc := r.Cluster.KubeContext
		if kc == "" {
			continue
		}
		const hint = "a smoke test deploys and deletes releases: point --kubeconfig/--context at a throwaway cluster (kind, k3s), or pass --i-know-this-is-a-real-cluster"
		if cl.Context == kc {
			return fault.Validationf("refusing to smoke-test release %s on context %q: it is environment %q's own kubeContext; %s", r.Name, kc, r.Environment, hint)
		}
		sel := flags
		sel.Context = ""
		own, err := kube.Connect(ctx, sel, kube.EnvCluster{Name: r.Environment, KubeContext: kc, KubeConfig: r.Cluster.KubeConfig}, kube.Options{})
		if err == nil && own.Server == cl.Server {
			return fault.Validationf("refusing to smoke-test release %s on %s: its server is that of environment %q's own kubeContext %q; %s", r.Name, cl, r.Environment, kc, hint)
		}
	}
	return nil
}

// SmokeOps are a smoke test's operations on one release in its throwaway
// namespace: the caller's apply, status, diff and delete, run as its users
// run them.
type SmokeOps interface {
	// Apply applies the release; nil when it reached no release.
	Apply(ctx context.Context) (*SmokeApplied, error)
	// Wait waits up to timeout (polling every interval; 0: the default)
	// for every object to be healthy, and reports each object's health.
	Wait(ctx context.Context, timeout, interval time.Duration) (objects []SmokeHealth, healthy bool, err error)
	// Diff is what a second apply would do.
	Diff(ctx context.Context) (*SmokeDiff, error)
	// Delete deletes the release and waits until it is gone; everything in
	// the throwaway namespace is the test's own.
	Delete(ctx context.Context) ([]SmokeDeleted, error)
}

// SmokeApplied is what the apply step deployed.
type SmokeApplied struct {
	ReleaseID, ManifestDigest, ChangeID string
	Objects                             int
	Created, Configured, Unchanged      int
}

// SmokeHealth is one object's health.
type SmokeHealth struct {
	ObjectRef
	Health health.Status
	Reason string
}

// SmokeDiff is what a second apply would change, and the counts.
type SmokeDiff struct {
	Objects                                  []manifest.Change
	Added, Modified, Unchanged, Stale, Ghost int
}

// SmokeDeleted is what the delete step did to one release.
type SmokeDeleted struct {
	Deleted, Skipped int
	Warnings         []string
	NothingToDelete  bool
}

// SmokeTest is how one release is smoke-tested.
type SmokeTest struct {
	// Cluster is where, Prefix starts the throwaway namespace's name
	// (SmokePrefix).
	Cluster *kube.Cluster
	Prefix  string
	// Timeout bounds the wait for health (DefaultSmokeTimeout when 0),
	// Interval its polling.
	Timeout, Interval time.Duration
	// Keep leaves the namespace, and after a failure everything in it.
	Keep bool
	// OnStep hears each step when it starts and ends.
	OnStep func(SmokeProgress)
	// Ops are the operations on the release in namespace.
	Ops func(namespace string) SmokeOps
}

// smokeRun carries one release's test.
type smokeRun struct {
	test   SmokeTest
	ops    SmokeOps
	sr     *SmokeRelease
	secret []string // Secret values to mask in free text
	// derived are the release's secrets and what they derive into, masked
	// where a refusal quotes a value, however short (values.RedactQuoted).
	derived []string
}

// Run smoke-tests rel in a throwaway namespace of its own: apply → every
// object healthy → a second apply would change nothing → delete → no
// inventory and no labelled object left. The first failing step ends the
// test; what it created is deleted with the namespace unless Keep. A
// failed step is a result with Passed false and a nil error; the error is
// for what a front door maps to its own exit code (an unreachable
// cluster, missing permissions).
func (t SmokeTest) Run(ctx context.Context, rel *render.Release) (SmokeRelease, error) {
	sr := SmokeRelease{Name: rel.Name, Environment: rel.Environment, OriginalNamespace: rel.Namespace, Steps: []SmokeStep{}}
	for _, s := range smokeSteps {
		sr.Steps = append(sr.Steps, SmokeStep{Name: s, State: StepSkipped})
	}
	run := &smokeRun{test: t, sr: &sr, secret: secretValues(rel), derived: rel.Secrets}
	ns, err := createSmokeNamespace(ctx, t.Cluster, t.Prefix, rel.Name)
	if err != nil {
		sr.FailedStep = SmokeApply
		sr.Steps[0] = SmokeStep{Name: SmokeApply, State: StepFailed, Detail: err.Error()}
		sr.Cleanup = "nothing was created"
		return sr, hardError(err)
	}
	sr.Namespace = ns
	run.ops = t.Ops(ns)

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
	if r.test.OnStep != nil {
		r.test.OnStep(SmokeProgress{Release: r.sr.Name, Namespace: r.sr.Namespace, Step: *s})
	}
	start := time.Now()
	detail, err := check(ctx)
	s.DurationSeconds = time.Since(start).Seconds()
	s.State, s.Detail = StepPassed, r.mask(detail)
	if err != nil {
		s.State, s.Detail = StepFailed, r.mask(err.Error())
		r.sr.FailedStep = s.Name
	}
	if r.test.OnStep != nil {
		r.test.OnStep(SmokeProgress{Release: r.sr.Name, Namespace: r.sr.Namespace, Step: *s})
	}
	return err
}

func (r *smokeRun) apply(ctx context.Context) (string, error) {
	a, err := r.ops.Apply(ctx)
	if a != nil {
		r.sr.ReleaseID, r.sr.ManifestDigest, r.sr.ChangeID, r.sr.Objects = a.ReleaseID, a.ManifestDigest, a.ChangeID, a.Objects
		if err == nil {
			return fmt.Sprintf("%d created, %d configured, %d unchanged", a.Created, a.Configured, a.Unchanged), nil
		}
	}
	if err == nil {
		err = errors.New("apply returned no release")
	}
	return "", err
}

func (r *smokeRun) healthy(ctx context.Context) (string, error) {
	timeout := cmp.Or(r.test.Timeout, DefaultSmokeTimeout)
	objects, healthy, err := r.ops.Wait(ctx, timeout, r.test.Interval)
	for _, o := range objects {
		if o.Health != health.Current {
			r.sr.Unhealthy = append(r.sr.Unhealthy, r.describe(ctx, o))
		}
	}
	if err != nil {
		return "", err
	}
	if !healthy {
		return "", fmt.Errorf("%d of %d objects are not healthy", len(r.sr.Unhealthy), len(objects))
	}
	return fmt.Sprintf("%d objects Current", len(objects)), nil
}

func (r *smokeRun) idempotent(ctx context.Context) (string, error) {
	d, err := r.ops.Diff(ctx)
	if err != nil {
		return "", err
	}
	for _, o := range d.Objects {
		if o.Action != manifest.Unchanged {
			r.sr.Changes = append(r.sr.Changes, o)
		}
	}
	if d.Added+d.Modified+d.Stale > 0 || d.Ghost > 0 {
		return "", fmt.Errorf("a second apply would change %d objects (%d added, %d modified, %d stale, %d ghost): the release does not converge", len(r.sr.Changes), d.Added, d.Modified, d.Stale, d.Ghost)
	}
	return fmt.Sprintf("%d objects unchanged", d.Unchanged), nil
}

func (r *smokeRun) delete(ctx context.Context) (string, error) {
	res, err := r.ops.Delete(ctx)
	if err != nil {
		return "", err
	}
	deleted := 0
	for _, d := range res {
		deleted += d.Deleted
		if d.Skipped > 0 {
			return "", fmt.Errorf("delete skipped %d objects: %s", d.Skipped, strings.Join(d.Warnings, "; "))
		}
	}
	return fmt.Sprintf("%d objects deleted, inventory deleted", deleted), nil
}

// clean checks that delete left nothing: no inventory Secret, and no object
// with the release's labels.
func (r *smokeRun) clean(ctx context.Context) (string, error) {
	inv, err := inventory.Find(ctx, r.test.Cluster.Clientset, r.sr.Namespace, r.sr.Name, r.sr.ReleaseID)
	if err != nil {
		return "", fmt.Errorf("looking for the inventory after delete: %w", err)
	}
	var left []string
	if inv != nil {
		left = append(left, "the inventory Secret")
	}
	objs, stats, err := discover.ByLabels(ctx, r.test.Cluster, discover.Query{Namespace: r.sr.Namespace, ReleaseName: r.sr.Name, ReleaseID: r.sr.ReleaseID}, discover.Options{MetadataOnly: true})
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
	if r.test.Keep {
		if r.sr.Passed {
			r.sr.Cleanup = fmt.Sprintf("namespace %s kept (--keep)", ns)
		} else {
			r.sr.Cleanup = fmt.Sprintf("namespace %s and everything in it kept (--keep): kubectl -n %s get all", ns, ns)
		}
		return
	}
	var notes []string
	if !r.sr.Passed && slices.Index(smokeSteps, r.sr.FailedStep) < slices.Index(smokeSteps, SmokeDelete) {
		if res, err := r.ops.Delete(ctx); err != nil {
			notes = append(notes, "deleting the release failed: "+r.mask(err.Error()))
		} else if len(res) == 1 && !res[0].NothingToDelete {
			notes = append(notes, fmt.Sprintf("release deleted (%d objects)", res[0].Deleted))
		}
	}
	bg := metav1.DeletePropagationBackground
	err := r.test.Cluster.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg})
	switch {
	case err == nil || apierrors.IsNotFound(err):
		notes = append(notes, fmt.Sprintf("namespace %s deleted", ns))
	default:
		notes = append(notes, fmt.Sprintf("deleting namespace %s failed: %v", ns, err))
	}
	r.sr.Cleanup = strings.Join(notes, "; ")
}

// describe adds an unhealthy object's status conditions.
func (r *smokeRun) describe(ctx context.Context, o SmokeHealth) SmokeObject {
	so := SmokeObject{ObjectRef: o.ObjectRef, Health: o.Health, Reason: r.mask(o.Reason)}
	m, err := r.test.Cluster.Mapper.RESTMapping(schema.GroupKind{Group: o.Group, Kind: o.Kind}, o.Version)
	if err != nil {
		return so
	}
	ri := r.test.Cluster.Dynamic.Resource(m.Resource)
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
	list, err := r.test.Cluster.Clientset.CoreV1().Events(r.sr.Namespace).List(ctx, metav1.ListOptions{})
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

// SmokePrefix starts the names of rel's throwaway namespaces: the given
// prefix (default "opm-smoke"), or, where the environment allows only some
// namespaces (namespaces.allowed), the fixed start of an allowed glob
// followed by "smoke" ("team-a-*" gives "team-a-smoke"), so the test
// deploys where the release may write. An environment whose patterns
// admit no throwaway name is refused, saying which pattern to add.
func SmokePrefix(given string, rel *render.Release) (string, error) {
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

// createSmokeNamespace creates prefix-release-<5 random characters>, so
// parallel runs never share a namespace.
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
