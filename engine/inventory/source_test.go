package inventory

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func from(commit, actor string) Change {
	c := change("X")
	c.Source = &Source{Commit: commit, Actor: actor, RunURL: "https://ci.example/runs/" + commit}
	return c
}

// A re-apply of the running change (a commit that left the release as it
// was) keeps when, from where and by whom it was first applied, records the
// new commit as a sighting, and moves only the last-applied time.
func TestReapplyKeepsFirstAppliedAndAddsASighting(t *testing.T) {
	inv := New(testRelease)
	inv.Record("change-sha1-aaaaaaaa", from("a", "alice"), t0, 0)
	inv.Record("change-sha1-aaaaaaaa", from("b", "bob"), t0.Add(time.Hour), 0)
	inv.Record("change-sha1-aaaaaaaa", from("b", "carol"), t0.Add(2*time.Hour), 0)
	inv.Record("change-sha1-aaaaaaaa", from("c", "bob"), t0.Add(3*time.Hour), 0)
	c := inv.Changes["change-sha1-aaaaaaaa"]
	assert.DeepEqual(t, c.FirstApplied(), Sighting{Time: "2026-02-11T14:30:00Z", Commit: "a", Actor: "alice", RunURL: "https://ci.example/runs/a"})
	assert.Equal(t, c.Timestamp, "2026-02-11T17:30:00Z", "last applied")
	var seen []string
	for _, s := range c.Seen {
		seen = append(seen, s.Commit+"@"+s.Time[11:16])
	}
	assert.DeepEqual(t, seen, []string{"c@17:30", "b@16:30"})
	for _, commit := range []string{"a", "b", "c"} {
		assert.Check(t, c.RanAt(commit), commit)
	}
	assert.Check(t, !c.RanAt("d"))
	assert.Equal(t, c.Commit(), "c")
}

// Sightings are bounded, newest kept; the first apply is never dropped.
func TestSightingsAreBounded(t *testing.T) {
	inv := New(testRelease)
	for i := range 3 * MaxSightings {
		inv.Record("change-sha1-aaaaaaaa", from(fmt.Sprintf("c%02d", i), "ci"), t0.Add(time.Duration(i)*time.Minute), 0)
	}
	c := inv.Changes["change-sha1-aaaaaaaa"]
	assert.Equal(t, len(c.Seen), MaxSightings)
	assert.Equal(t, c.Seen[0].Commit, fmt.Sprintf("c%02d", 3*MaxSightings-1))
	assert.Equal(t, c.FirstApplied().Commit, "c00")
	b, err := json.Marshal(c.Seen)
	assert.NilError(t, err)
	t.Logf("%d sightings: %d bytes", len(c.Seen), len(b))
	assert.Assert(t, len(b) < 2048, "sightings take %d bytes", len(b))
}

// Returning to a change after another one ran (a rollback) keeps who
// first applied it and when, adds the return as a sighting (from the same
// commit too), and starts the health clock again; re-applies while it runs
// keep the clock.
func TestReturnToAnOlderChangeKeepsItsRecordAndStartsItsClock(t *testing.T) {
	inv := New(testRelease)
	inv.Record("change-sha1-aaaaaaaa", from("a", "alice"), t0, 0)
	inv.Record("change-sha1-bbbbbbbb", from("b", "bob"), t0.Add(time.Hour), 0)
	inv.Record("change-sha1-aaaaaaaa", from("a", "oncall"), t0.Add(2*time.Hour), 0)
	c := inv.Changes["change-sha1-aaaaaaaa"]
	assert.Equal(t, c.FirstApplied().Time, "2026-02-11T14:30:00Z")
	assert.Equal(t, c.FirstApplied().Actor, "alice")
	assert.Equal(t, len(c.Seen), 1)
	assert.Equal(t, c.Seen[0].Actor, "oncall")
	assert.Equal(t, c.Seen[0].Time, "2026-02-11T16:30:00Z")
	assert.Equal(t, c.Clock(), "2026-02-11T16:30:00Z")

	inv.Record("change-sha1-aaaaaaaa", from("c", "carol"), t0.Add(3*time.Hour), 0)
	c = inv.Changes["change-sha1-aaaaaaaa"]
	assert.Equal(t, c.Clock(), "2026-02-11T16:30:00Z", "a re-apply while it runs keeps the clock")
	assert.Equal(t, c.FirstApplied().Actor, "alice")
	assert.Equal(t, c.Seen[0].Actor, "carol")
	assert.Check(t, c.RanAt("a") && c.RanAt("c"))

	first := New(testRelease)
	first.Record("change-sha1-aaaaaaaa", from("a", "alice"), t0, 0)
	assert.Equal(t, first.Changes["change-sha1-aaaaaaaa"].Clock(), "2026-02-11T14:30:00Z", "a first apply starts the clock")
}

// A change recorded before sightings existed reads as first applied when
// it was last applied, and a re-apply of it starts recording from there:
// no migration step.
func TestOldRecordsReadWithoutMigration(t *testing.T) {
	inv := New(testRelease)
	old := from("a", "")
	old.Timestamp = "2026-01-01T00:00:00Z"
	inv.Changes["change-sha1-aaaaaaaa"] = &old
	inv.Index = []string{"change-sha1-aaaaaaaa"}
	c := inv.Changes["change-sha1-aaaaaaaa"]
	assert.Equal(t, c.FirstApplied().Time, "2026-01-01T00:00:00Z")
	assert.Check(t, c.RanAt("a"))

	inv.Record("change-sha1-aaaaaaaa", from("b", "bob"), t0, 0)
	c = inv.Changes["change-sha1-aaaaaaaa"]
	assert.Equal(t, c.FirstApplied().Time, "2026-01-01T00:00:00Z")
	assert.Equal(t, c.FirstApplied().Commit, "a")
	assert.Equal(t, c.Seen[0].Commit, "b")
}
