package inventory

import "slices"

// Source is where a change came from, as far as it is known: the git
// state of the deployment directory it was rendered from and the CI run
// that applied it. Rollback renders Commit again.
type Source struct {
	Commit string `json:"commit,omitempty"`
	// Ref is the branch or tag the commit was checked out as.
	Ref string `json:"ref,omitempty"`
	// Dirty is true when the deployment directory had changes the commit
	// does not hold: the commit alone does not reproduce the change.
	Dirty bool `json:"dirty,omitempty"`
	// RunURL is the CI run that applied the change.
	RunURL string `json:"runUrl,omitempty"`
	// Actor is who applied it: GITHUB_ACTOR in GitHub Actions, else the
	// local user and host.
	Actor string `json:"actor,omitempty"`
	// GatesSkippedBy names who applied with --skip-gates: the promotion
	// gates of the environment were not checked for this change.
	GatesSkippedBy string `json:"gatesSkippedBy,omitempty"`
}

// Sighting is one apply of a change: when, from which commit, by whom,
// from which CI run.
type Sighting struct {
	Time   string `json:"time"`
	Commit string `json:"commit,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	Actor  string `json:"actor,omitempty"`
	RunURL string `json:"runUrl,omitempty"`
}

// MaxSightings bounds Change.Seen: the newest are kept. A sighting is at
// most about 200 bytes (a run URL is the longest part), so a change's
// record of what ran it stays under 2 KiB however often it is re-applied.
const MaxSightings = 8

func sightingOf(ts string, src *Source) Sighting {
	s := Sighting{Time: ts}
	if src != nil {
		s.Commit, s.Dirty, s.Actor, s.RunURL = src.Commit, src.Dirty, src.Actor, src.RunURL
	}
	return s
}

// FirstApplied is when, from where and by whom the change was first
// applied. Records written before First existed answer with their
// (last) Timestamp and Source: the best that is known.
func (c *Change) FirstApplied() Sighting {
	if c.First != nil {
		return *c.First
	}
	return sightingOf(c.Timestamp, c.Source)
}

// RanAt reports whether the change was applied from commit (clean):
// first, at any kept sighting, or last.
func (c *Change) RanAt(commit string) bool {
	if commit == "" {
		return false
	}
	at := func(s Sighting) bool { return s.Commit == commit && !s.Dirty }
	return at(c.FirstApplied()) || slices.ContainsFunc(c.Seen, at) || at(sightingOf(c.Timestamp, c.Source))
}

// carryOver keeps what a re-apply of the same change must not rewrite
// from prev: when, where and by whom it was first applied, and its
// sightings. While the release ran this change all along (running: prev is
// the latest change) this apply is a sighting when it comes from a commit
// not seen yet, and the health clock keeps running. A return to the change
// after another one (a rollback) is always a sighting — who returned to it
// and when — and starts the health clock again.
func (c *Change) carryOver(prev *Change, ts string, running bool) {
	now, first := sightingOf(ts, c.Source), prev.FirstApplied()
	c.Seen = slices.Clone(prev.Seen)
	c.First = &first
	if running {
		c.Running = prev.Running
		if now.Commit != first.Commit || now.Dirty != first.Dirty {
			c.see(now)
		}
		return
	}
	c.Running = ts
	c.see(now)
}

// Clock is when the release started running this change the last time:
// the health clock that the soak, the gates and the board read.
func (c *Change) Clock() string {
	if c.Running != "" {
		return c.Running
	}
	return c.FirstApplied().Time
}

// see adds s to the sightings, newest first and bounded; one from the
// same commit moves to the front.
func (c *Change) see(s Sighting) {
	same := func(o Sighting) bool { return o.Commit == s.Commit && o.Dirty == s.Dirty }
	c.Seen = slices.DeleteFunc(c.Seen, same)
	c.Seen = slices.Insert(c.Seen, 0, s)
	if len(c.Seen) > MaxSightings {
		c.Seen = c.Seen[:MaxSightings]
	}
}

// Commit is the newest commit the change was applied from with a clean
// checkout (last, then the sightings, then first), "" when none: the
// commit a rollback renders to reproduce it.
func (c *Change) Commit() string {
	for _, s := range append(append([]Sighting{sightingOf(c.Timestamp, c.Source)}, c.Seen...), c.FirstApplied()) {
		if s.Commit != "" && !s.Dirty {
			return s.Commit
		}
	}
	return ""
}
