package change

import (
	"cmp"
	"slices"
	"strings"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/values"
)

// What hides secrets in a comparison: sealed identifiers, warnings with
// their values redacted, hidden names ordered last.

// Sealed returns a copy of cs whose sensitive releases show sealed digests
// and change IDs.
func (cs *Set) Sealed(s *manifest.Sealer) *Set {
	out := *cs
	out.Releases = slices.Clone(cs.Releases)
	for i, rc := range out.Releases {
		if !rc.Sensitive {
			continue
		}
		rc.Head = sealRevision(s, rc.Head)
		if rc.Base != nil {
			b := sealRevision(s, *rc.Base)
			rc.Base = &b
		}
		out.Releases[i] = rc
	}
	return &out
}

func sealRevision(s *manifest.Sealer, r Revision) Revision {
	return Revision{ManifestDigest: s.Digest(r.ManifestDigest), ChangeID: s.ChangeID(r.ChangeID)}
}

// Redact removes secret values (from SOPS files or secret inputs) from the
// free text of rc: warnings, which may quote a value. Diffs are masked by
// path where they are made (engine/diff, engine/taint), never by text: a
// public field that equals a secret stays readable, so the mask is no
// oracle.
func (rc *Release) Redact(secrets []string) {
	if len(secrets) == 0 {
		return
	}
	for i := range rc.Objects {
		// An object's warning is the API server's refusal, when it has one:
		// masked as every command masks refusals, then as opm's words.
		rc.Objects[i].Warning = values.Redact(values.RedactQuoted(rc.Objects[i].Warning, secrets), secrets)
	}
	for i := range rc.Warnings {
		rc.Warnings[i] = values.Redact(rc.Warnings[i], secrets)
	}
}

// HiddenLast orders objs so that an object whose name carries a secret
// (its name is hidden, redact.Hidden) comes after the others of its
// section — the rendered objects, the stale ones, the ghosts, each a run
// of one kind of change — ordered among its like by its stand-in. In
// apply order, a hidden name would sit where its real name sorts, between
// public neighbours ("fence-c", hidden, "fence-d") that spell it out.
func HiddenLast[T any](red *redact.Redactor, objs []T, name func(T) string, section func(T) string) {
	if red == nil || len(objs) < 2 {
		return
	}
	rank := map[string]int{}
	type keyed struct {
		rank   int
		hidden bool
		stand  string
	}
	keys := make(map[int]keyed, len(objs))
	idx := make([]int, len(objs))
	for i, o := range objs {
		idx[i] = i
		s := section(o)
		if _, ok := rank[s]; !ok {
			rank[s] = len(rank)
		}
		stand, hidden := red.Hidden(name(o))
		keys[i] = keyed{rank: rank[s], hidden: hidden, stand: stand}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ka, kb := keys[a], keys[b]
		if c := cmp.Compare(ka.rank, kb.rank); c != 0 {
			return c
		}
		switch {
		case ka.hidden && kb.hidden:
			return strings.Compare(ka.stand, kb.stand)
		case ka.hidden:
			return 1
		case kb.hidden:
			return -1
		}
		return 0
	})
	sorted := make([]T, len(objs))
	for i, j := range idx {
		sorted[i] = objs[j]
	}
	copy(objs, sorted)
}

// OrderHidden orders the objects of rc as HiddenLast does.
func (rc *Release) OrderHidden(red *redact.Redactor) {
	HiddenLast(red, rc.Objects, func(o manifest.Change) string { return o.Ref.Name }, func(o manifest.Change) string {
		if o.Action == manifest.Stale || o.Action == manifest.Ghost {
			return string(o.Action)
		}
		return ""
	})
}
