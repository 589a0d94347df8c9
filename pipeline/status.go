package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/opmodel/pipeline/engine/objects"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/health"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/workers"
)

// StatusOptions are the options of Status.
type StatusOptions struct {
	Target
	ClusterOptions
	// Wait polls until every object is Current or one Failed, or Timeout.
	Wait    bool          `json:"wait,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
	// Interval is the polling interval of Wait (default 2s).
	Interval time.Duration `json:"-"`
	// Progress, when set, hears each object as it changes health during Wait.
	Progress func(release string, h health.ObjectHealth) `json:"-"`
	// rendered are the selection's releases as an apply just rendered
	// them, when it waits for them: nothing is loaded or rendered again.
	rendered []*render.Release
}

// StatusResult is what Status returns.
type StatusResult struct {
	Releases []ReleaseStatus `json:"releases"`
	// Healthy is true when every object of every release is Current.
	Healthy bool `json:"healthy"`
}

// ReleaseStatus is one release's identity and the health of its objects.
type ReleaseStatus struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	Environment string `json:"environment,omitempty"`
	ReleaseID   string `json:"releaseId"`
	ModuleID    string `json:"moduleId,omitempty"`
	// ChangeID and LastTransitionTime come from the inventory; empty when
	// the release was found by labels.
	ChangeID           string `json:"changeId,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// Source is where the current change came from (git commit, run).
	Source *inventory.Source `json:"source,omitempty"`
	// Since is when the release entered the health it has now: when its
	// current change was first applied (a re-apply of the same change does
	// not move it), or the latest readiness transition of one of its
	// objects after that (a Deployment that became Available, or stopped
	// being; health.Since); RFC 3339, empty when neither is known. The
	// rollout's soak, the promotion gates and the board read this clock.
	Since string `json:"since,omitempty"`
	// Discovery is "inventory" or "labels".
	Discovery  string            `json:"discovery"`
	Components []ComponentStatus `json:"components"`
	// Ghosts carry the release's labels but are in neither the inventory
	// nor the render.
	Ghosts  []ObjectStatus `json:"ghosts,omitempty"`
	Healthy bool           `json:"healthy"`
	// Warnings: what the inventory records beyond the environment's
	// reach, left unread.
	Warnings []string `json:"warnings,omitempty"`
	// EditedSince are objects whose desired state another field manager
	// than opm wrote after the release's last apply (a kubectl apply of
	// an old manifest, kubectl edit or set image): what runs may not be
	// the recorded change, healthy or not. Read from the objects' managed
	// fields, which status fetches anyway.
	EditedSince []string `json:"editedSince,omitempty"`
}

// ComponentStatus groups a component's objects.
type ComponentStatus struct {
	Name    string         `json:"name"`
	Objects []ObjectStatus `json:"objects"`
}

// ObjectStatus is one object's health: Current, InProgress, Failed,
// Missing or Terminating, with kstatus's reason.
type ObjectStatus struct {
	ObjectRef
	Health health.Status `json:"health"`
	Reason string        `json:"reason,omitempty"`
}

// Status reports the health of the targeted releases' objects, found
// through the inventory (targeted GETs) or, without one, a label scan.
// With Wait it polls until all are Current or one fails.
func Status(ctx context.Context, opts StatusOptions) (*StatusResult, error) {
	return routed(ctx, opts.Selection,
		func() (*StatusResult, error) { return statusEnvironment(ctx, opts) },
		func(envs []FleetEnvironment) (*StatusResult, error) { return statusFleet(ctx, opts, envs) })
}

// statusEnvironment is Status in one environment (or none).
func statusEnvironment(ctx context.Context, opts StatusOptions) (*StatusResult, error) {
	var ds []*deployed
	var err error
	if opts.rendered != nil {
		ds, err = resolveRendered(ctx, opts.Target, opts.ClusterOptions, true, opts.rendered)
	} else {
		ds, err = resolveCached(ctx, opts.Target, opts.ClusterOptions, true)
	}
	if err != nil {
		return nil, err
	}
	res := &StatusResult{Healthy: true, Releases: make([]ReleaseStatus, len(ds))}
	errs := make([]error, len(ds))
	if opts.Wait {
		// Releases are waited for together: the timeout bounds the whole
		// wait, not each release in turn.
		if p := opts.Progress; p != nil {
			var mu sync.Mutex
			opts.Progress = func(r string, h health.ObjectHealth) { mu.Lock(); defer mu.Unlock(); p(r, h) }
		}
	}
	var g workers.Group
	for i, d := range ds {
		if !opts.Wait {
			res.Releases[i], errs[i] = releaseStatus(ctx, d, opts)
			continue
		}
		g.Go(func() {
			res.Releases[i], errs[i] = releaseStatus(ctx, d, opts)
		})
	}
	g.Wait()
	for _, rs := range res.Releases {
		res.Healthy = res.Healthy && rs.Healthy
	}
	return res, errors.Join(errs...)
}

func releaseStatus(ctx context.Context, d *deployed, opts StatusOptions) (ReleaseStatus, error) {
	rs := ReleaseStatus{Name: d.name, Namespace: d.namespace, Environment: d.environment, ReleaseID: d.releaseID, ModuleID: d.moduleID, Discovery: d.strategy}
	var clock string
	if d.inv != nil {
		if w := inventory.OutsideWarning(d.inv.Name(), d.outside); w != "" {
			rs.Warnings = append(rs.Warnings, w)
		}
		var c *inventory.Change
		rs.ChangeID, c, _ = d.inv.Latest()
		rs.LastTransitionTime = d.inv.Metadata.LastTransitionTime
		clock = rs.LastTransitionTime
		if c != nil {
			rs.Source = c.Source
			// A re-apply of the running change rewrites the last-applied
			// time, never when the release started running it: the health
			// clock.
			clock = c.Clock()
		}
	}
	var hs []health.ObjectHealth
	var waitErr error
	if opts.Wait {
		var progress func(health.ObjectHealth)
		if opts.Progress != nil {
			progress = func(h health.ObjectHealth) { opts.Progress(d.name, h) }
		}
		hs, waitErr = health.Wait(ctx, d.cluster, d.entries, health.WaitOptions{
			Interval: opts.Interval, Timeout: opts.Timeout, OnChange: progress, Discovery: discover.Options{ReleaseID: d.releaseID},
		})
		var we *health.WaitError
		if waitErr != nil && !errors.As(waitErr, &we) {
			return rs, waitErr
		}
	} else {
		found, _, err := discover.FromInventory(ctx, d.cluster, d.entries, discover.Options{ReleaseID: d.releaseID})
		if err != nil {
			return rs, err
		}
		hs = health.Check(found)
		if !health.Healthy(hs) {
			health.Explain(ctx, d.cluster, found, hs)
		}
		if applied, err := time.Parse(time.RFC3339, rs.LastTransitionTime); err == nil {
			rs.EditedSince = editedSince(found, applied)
		}
		for _, f := range found {
			if rs.ModuleID == "" && f.Object != nil {
				rs.ModuleID = f.Object.GetLabels()[manifest.LabelModuleUUID]
			}
		}
	}
	rs.Components = groupByComponent(hs)
	rs.Healthy = health.Healthy(hs)
	rs.Since = since(clock, hs)
	for _, g := range d.ghosts {
		rs.Ghosts = append(rs.Ghosts, ObjectStatus{ObjectRef: g.Ref(), Health: "Ghost", Reason: "carries the release's labels but is in neither the inventory nor the render"})
	}
	return rs, waitErr
}

// since is the later of the release's health clock (when its current
// change was first applied, RFC 3339) and its objects' latest readiness
// transitions.
func since(changed string, hs []health.ObjectHealth) string {
	latest, _ := time.Parse(time.RFC3339, changed)
	for _, h := range hs {
		if h.Since.After(latest) {
			latest = h.Since
		}
	}
	if latest.IsZero() {
		return changed
	}
	return latest.UTC().Format(time.RFC3339)
}

func groupByComponent(hs []health.ObjectHealth) []ComponentStatus {
	var out []ComponentStatus
	for _, h := range hs {
		i := slices.IndexFunc(out, func(c ComponentStatus) bool { return c.Name == h.Entry.Component })
		if i < 0 {
			out = append(out, ComponentStatus{Name: h.Entry.Component})
			i = len(out) - 1
		}
		out[i].Objects = append(out[i].Objects, ObjectStatus{ObjectRef: h.Entry.Ref(), Health: h.Status, Reason: h.Reason})
	}
	slices.SortStableFunc(out, func(a, b ComponentStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// statusFleet reports each environment of a fleet, in wave order.
func statusFleet(ctx context.Context, opts StatusOptions, envs []FleetEnvironment) (*StatusResult, error) {
	out := &StatusResult{Healthy: true}
	err := eachEnvironment(opts.Selection, envs, func(sel Selection) error {
		o := opts
		o.Selection = sel
		r, err := Status(ctx, o)
		if r == nil {
			out.Healthy = false
			return err
		}
		out.Releases = append(out.Releases, r.Releases...)
		out.Healthy = out.Healthy && r.Healthy
		return err
	})
	return out, err
}

// editedSince names the objects whose spec or data a field manager other
// than opm wrote after applied (in the same second too: managed fields
// keep whole seconds): a scale (the scale subresource, an
// autoscaler's) and status writes are not edits, nor a controller's own
// metadata (the deployment controller's revision annotation).
func editedSince(found []discover.Found, applied time.Time) []string {
	var out []string
	for _, f := range found {
		if f.Object == nil {
			continue
		}
		for _, mf := range f.Object.GetManagedFields() {
			if mf.Manager == objects.FieldManager || mf.Subresource != "" || mf.Time == nil || mf.Time.Time.Before(applied) || mf.FieldsV1 == nil {
				continue
			}
			var fields map[string]any
			if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
				continue
			}
			desired := false
			for _, k := range []string{"f:spec", "f:data", "f:stringData", "f:binaryData"} {
				if _, ok := fields[k]; ok {
					desired = true
				}
			}
			if desired {
				out = append(out, fmt.Sprintf("%s/%s: changed by %s at %s, after the last apply", f.Object.GetKind(), f.Object.GetName(), mf.Manager, mf.Time.UTC().Format(time.RFC3339)))
				break
			}
		}
	}
	return out
}
