package manifest

import "encoding/json"

// Change is what happened, or would happen, to one object: the one
// per-object outcome of the resource manager, apply, prune, delete, diff,
// review and smoke (what fluxcd/pkg/ssa's ChangeSetEntry is). Its JSON is
// the apply spelling — the reference inline, then action and reason — which
// `opm apply`, `prune` and `delete -o json` have always printed; diffs and
// reviews print theirs through Compared.
type Change struct {
	Ref
	Action Action `json:"action,omitempty"`
	// Reason explains a skipped or failed object, or notes a dry run.
	Reason string `json:"reason,omitempty"`
	// Diff is a unified YAML diff of the object, Secret values masked (a
	// comparison: an added object's every line added, a stale one's removed).
	Diff string `json:"-"`
	// Warning says why apply would not act as a comparison suggests (an
	// immutable field, protection, a stale object already gone, a ghost).
	Warning string `json:"-"`
	// KeptBy is the annotation that keeps a stale object from prune
	// (KeptBy), or "".
	KeptBy string `json:"-"`
}

// ChangeOf is the change a for the object id, written with version by
// component.
func ChangeOf(id ID, version, component string, a Action) Change {
	return Change{Ref: RefOf(id, version, component), Action: a}
}

// Compared is a list of changes as a diff or a review spells it in JSON:
// {"object": <ref>, "change": <action>, "diff", "warning"} for each, the
// shape `opm diff -o json`, `opm review -o json` and review shards have
// always had (a shard's JSON is read back, so both directions keep it).
type Compared []Change

type comparedJSON struct {
	Object  Ref    `json:"object"`
	Change  Action `json:"change"`
	Diff    string `json:"diff,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// MarshalJSON writes each change in the comparison's shape.
func (c Compared) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	out := make([]comparedJSON, len(c))
	for i, ch := range c {
		out[i] = comparedJSON{Object: ch.Ref, Change: ch.Action, Diff: ch.Diff, Warning: ch.Warning}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (c *Compared) UnmarshalJSON(b []byte) error {
	var in []comparedJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if in == nil {
		*c = nil
		return nil
	}
	out := make(Compared, len(in))
	for i, j := range in {
		out[i] = Change{Ref: j.Object, Action: j.Change, Diff: j.Diff, Warning: j.Warning}
	}
	*c = out
	return nil
}
