// 4. Compare each pair: the head's objects against the base's by identity,
// Secret values masked, then the stale set.

package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/pipeline/change"
)

// compareRelease builds the review of one release × environment from both
// sides' renders.
func (r *review) compareRelease(ctx context.Context, key, env string, head, base sideRender) change.Release {
	rc := change.Release{Name: key, Key: key, Environment: env, Objects: []manifest.Change{}}
	headRel, baseRel := head.rel, base.rel
	var errs []error
	for _, e := range []error{head.err, base.err} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	for _, r := range []*render.Release{baseRel, headRel} { // head wins
		if r != nil {
			rc.Name, rc.Namespace, rc.ReleaseID = r.Name, r.Namespace, r.ReleaseID
		}
	}
	if len(errs) > 0 {
		rc.Error = errors.Join(errs...).Error()
		return rc
	}
	if headRel != nil {
		rc.Head = change.Revision{ManifestDigest: headRel.ManifestDigest, ChangeID: headRel.ChangeID}
		rc.Warnings = append(rc.Warnings, headRel.Warnings...)
		rc.Warnings = append(rc.Warnings, change.WouldRefuse(headRel)...)
		rc.Sensitive = headRel.Sensitive()
	}
	if baseRel != nil {
		rc.Base = &change.Revision{ManifestDigest: baseRel.ManifestDigest, ChangeID: baseRel.ChangeID}
		rc.Sensitive = rc.Sensitive || baseRel.Sensitive()
	}
	var headRes, baseRes []manifest.Resource
	if headRel != nil {
		headRes = headRel.Resources
	}
	if baseRel != nil {
		baseRes = baseRel.Resources
	}
	if headRel != nil {
		rc.Reach = change.ReachOf(headRes)
	}
	if baseRel != nil {
		rc.BaseReach = change.ReachOf(baseRes)
	}
	if rc.Reach != nil && rc.BaseReach != nil && !rc.Reach.Equal(rc.BaseReach) {
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("this change moves where release %s writes: %s → %s", key, rc.BaseReach, rc.Reach))
	}
	baseFields, headFields := secretFieldsOf(baseRel), secretFieldsOf(headRel)
	if err := r.compare(&rc, baseRes, headRes, baseFields, headFields); err != nil {
		rc.Error = err.Error()
		rc.Objects = []manifest.Change{}
		rc.Counts = change.Counts{}
		return rc
	}
	rc.Highlights = highlights(baseRes, headRes, baseFields, headFields)
	if w := unmovedChange(baseRel, headRel, rc.Counts, env); w != "" {
		rc.Warnings = append(rc.Warnings, w)
	}
	switch {
	case headRel == nil && baseRel != nil:
		rc.Warnings = append(rc.Warnings, fmt.Sprintf(
			"release %s is not declared in the head for this environment: the %d objects it rendered in the base are stale, and apply does not touch releases it no longer renders; remove them with `opm delete --name %s -n %s`",
			key, len(baseRes), baseRel.Name, baseRel.Namespace))
	case headRel != nil && len(headRes) == 0 && len(baseRes) > 0:
		rc.Warnings = append(rc.Warnings, fmt.Sprintf(
			"the head renders no objects for release %s: applying it would prune all %d objects the base rendered, so apply refuses without --force", key, len(baseRes)))
	}
	for _, r := range []*render.Release{headRel, baseRel} {
		if r != nil {
			rc.Redact(r.Secrets)
		}
	}
	rc.OrderHidden(redact.From(ctx))
	return rc
}

// compare classifies head objects against base objects by
// Kubernetes identity, then adds the stale set in delete order.
func (r *review) compare(rc *change.Release, baseRes, headRes []manifest.Resource, baseFields, headFields map[manifest.ID][]taint.Field) error {
	// Markers belong to the release in its environment: the same in base
	// and head, unrelated to any other release's.
	m := r.masker.In(rc.Environment + "\x00" + rc.Key)
	baseByID := make(map[manifest.ID]manifest.Resource, len(baseRes))
	for _, res := range baseRes {
		baseByID[res.ID()] = res
	}
	for _, res := range headRes {
		oc := manifest.Change{Ref: inventory.EntryOf(res).Ref()}
		before := baseByID[res.ID()].Object // nil when the base lacks it
		text, err := diff.Unified(before, res.Object, reviewDiffOptions(res.ID(), m.ForObject(headFields[res.ID()], baseFields[res.ID()])))
		if err != nil {
			return err
		}
		switch {
		case before == nil:
			oc.Action = manifest.Added
		case text == "":
			oc.Action = manifest.Unchanged
		default:
			oc.Action = manifest.Modified
		}
		oc.Diff = text
		rc.Objects = append(rc.Objects, oc)
		rc.Counts.Add(oc.Action)
	}
	for _, e := range inventory.Stale(inventory.Entries(baseRes), inventory.Entries(headRes)) {
		oc := manifest.Change{Ref: e.Ref(), Action: manifest.Stale}
		text, err := diff.Unified(baseByID[e.ID].Object, nil, reviewDiffOptions(e.ID, m.ForObject(baseFields[e.ID])))
		if err != nil {
			return err
		}
		oc.Diff = text
		if w, relWarn := r.opts.Protection.Warnings(e, manifest.KeptBy(baseByID[e.ID].Object.GetAnnotations())); w != "" {
			oc.Warning = w
			rc.Warnings = append(rc.Warnings, relWarn)
		}
		rc.Objects = append(rc.Objects, oc)
		rc.Counts.Add(manifest.Stale)
	}
	return nil
}

// secretFieldsOf maps each object of rel to the fields a secret reaches.
func secretFieldsOf(rel *render.Release) map[manifest.ID][]taint.Field {
	if rel == nil || len(rel.SecretFields) == 0 {
		return nil
	}
	out := make(map[manifest.ID][]taint.Field, len(rel.Resources))
	for i, r := range rel.Resources {
		if i < len(rel.SecretFields) && len(rel.SecretFields[i]) > 0 {
			out[r.ID()] = rel.SecretFields[i]
		}
	}
	return out
}

func reviewDiffOptions(id manifest.ID, m *diff.Masker) diff.Options {
	return diff.Options{FromFile: "base/" + id.String(), ToFile: "head/" + id.String(), Masker: m}
}

// unmovedChange says why a pair whose change ID moves shows no object
// change: which values changed (paths only: the values shown elsewhere
// are masked, the paths never carry a secret), or the module's version.
// A reviewer otherwise reads "no changes" for a change apply will record.
func unmovedChange(base, head *render.Release, c change.Counts, env string) string {
	if base == nil || head == nil || base.ChangeID == head.ChangeID || c.Added+c.Modified+c.Stale > 0 {
		return ""
	}
	var before, after any
	if json.Unmarshal(base.Values, &before) != nil || json.Unmarshal(head.Values, &after) != nil {
		return ""
	}
	paths := changedPaths("values", before, after, nil)
	where := ""
	if env != "" {
		where = " in environment " + env
	}
	switch {
	case len(paths) > 0:
		if len(paths) > 8 {
			paths = append(paths[:8], fmt.Sprintf("and %d more", len(paths)-8))
		}
		return fmt.Sprintf("%s changed, but no object did: nothing release %s renders%s uses them, or they set what something else decides (replicas while an autoscaler scales the workload); apply records a new change and changes nothing on the cluster",
			strings.Join(paths, ", "), head.Name, where)
	case base.Module.Version != head.Module.Version:
		return fmt.Sprintf("the module's version changed (%s → %s), but no object did; apply records a new change and changes nothing on the cluster", base.Module.Version, head.Module.Version)
	}
	return ""
}

// changedPaths appends to out the dotted paths below prefix at which a and
// b differ, keys in sorted order.
func changedPaths(prefix string, a, b any, out []string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			out = append(out, prefix)
		}
		return out
	}
	keys := slices.Sorted(maps.Keys(am))
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = changedPaths(prefix+"."+k, am[k], bm[k], out)
	}
	return out
}
