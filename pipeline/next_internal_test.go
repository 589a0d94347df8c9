package pipeline

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/pipeline/rollout"
)

// After an unhealthy wave, `next:` offers a rollback only for the releases
// this run changed, back to the change each ran before it: a release the
// run re-applied as it was (a healthy worker) is not where the failure
// came from, and sending it back to an older change would break it.
func TestNextRollbackOnlyForWhatThisRunChanged(t *testing.T) {
	rel := func(name, change, previous string) AppliedRelease {
		ar := AppliedRelease{RenderedRelease: RenderedRelease{Name: name, ChangeID: change}}
		ar.Inventory = reconcile.InventoryRef{ChangeIDs: []string{change, "change-sha1-00000old"}, Previous: previous, Written: true}
		return ar
	}
	e := RolloutEnvironment{FleetEnvironment: FleetEnvironment{Name: "canary"}, Result: RolloutUnhealthy, Releases: []AppliedRelease{
		rel("api", "change-sha1-0000new1", "change-sha1-0000was1"),
		rel("worker", "change-sha1-00000same", "change-sha1-00000same"),
		rel("cron", "change-sha1-00000first", ""),
		rel("db", "change-sha1-0000new2", "change-sha1-0000was2"),
	}}
	// The database's manifest holds secret data: its change IDs stay out
	// of what CI publishes, not of the operator's terminal.
	e.Releases[3].Sensitive = true
	opts := RolloutOptions{ApplyOptions: ApplyOptions{Selection: Selection{Dir: "deploy"}}}
	assert.DeepEqual(t, rollout.NextSteps(opts.shown(), e, false), []string{
		"opm rollback api deploy --env canary --to change-sha1-0000was1   # back to what ran before",
		"opm rollback db deploy --env canary --to change-sha1-0000was2   # back to what ran before",
		"or fix forward: commit a fix and rerun: opm apply deploy --env canary",
	})
	// In a deploy job's error, which CI publishes as it is.
	assert.DeepEqual(t, rollout.NextSteps(opts.shown(), e, true), []string{
		"opm rollback api deploy --env canary --to change-sha1-0000was1   # back to what ran before",
		"opm history db deploy --env canary   # then opm rollback db to the change before this one",
		"or fix forward: commit a fix and rerun: opm apply deploy --env canary",
	})
}

// With nothing this run changed to roll back, fixing forward is the one
// step, said without a dangling "or"; a rollback's steps name the
// directory the user gave, not the checkout it applied from.
func TestNextStepsWithoutARollback(t *testing.T) {
	rel := AppliedRelease{RenderedRelease: RenderedRelease{Name: "api", ChangeID: "change-sha1-00000same"}}
	rel.Inventory = reconcile.InventoryRef{Previous: "change-sha1-00000same", Written: true}
	e := RolloutEnvironment{FleetEnvironment: FleetEnvironment{Name: "staging"}, Result: RolloutUnhealthy, Releases: []AppliedRelease{rel}}
	opts := RolloutOptions{ApplyOptions: ApplyOptions{Selection: Selection{Dir: "deploy"}}}
	assert.DeepEqual(t, rollout.NextSteps(opts.shown(), e, true), []string{"fix forward: commit a fix and rerun: opm apply deploy --env staging"})
	opts.Selection.Dir, opts.shownDir = "/tmp/opm-gitref-1/tree", "deploy"
	assert.DeepEqual(t, rollout.NextSteps(opts.shown(), e, true), []string{"fix forward: commit a fix and rerun: opm apply deploy --env staging"})
}

// A release this run changed that is healthy while a neighbour is not is
// not offered a rollback: only what the wait found unhealthy is.
func TestNextRollbackOnlyForTheUnhealthy(t *testing.T) {
	rel := func(name, change, previous string) AppliedRelease {
		ar := AppliedRelease{RenderedRelease: RenderedRelease{Name: name, ChangeID: change}}
		ar.Inventory = reconcile.InventoryRef{Previous: previous, Written: true}
		return ar
	}
	e := RolloutEnvironment{FleetEnvironment: FleetEnvironment{Name: "canary"}, Result: RolloutUnhealthy, Releases: []AppliedRelease{
		rel("api", "change-sha1-0000new1", "change-sha1-0000was1"),
		rel("web", "change-sha1-0000new2", "change-sha1-0000was2"),
	}, Unhealthy: []string{"api"}}
	opts := RolloutOptions{ApplyOptions: ApplyOptions{Selection: Selection{Dir: "deploy"}}}
	assert.DeepEqual(t, rollout.NextSteps(opts.shown(), e, false), []string{
		"opm rollback api deploy --env canary --to change-sha1-0000was1   # back to what ran before",
		"or fix forward: commit a fix and rerun: opm apply deploy --env canary",
	})
}
