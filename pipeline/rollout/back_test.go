package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline/rollout"
)

// back scripts a fleet's rollback, recording each move and wait.
type back struct {
	mu        sync.Mutex
	calls     []string
	fail      map[string]error
	unhealthy map[string]string
}

func (b *back) Back(_ context.Context, env rollout.FleetEnvironment, m rollout.Move) ([]release, error) {
	b.mu.Lock()
	b.calls = append(b.calls, fmt.Sprintf("back %s %s to %s", env.Name, m.Release, m.To))
	b.mu.Unlock()
	if err := b.fail[env.Name]; err != nil {
		return nil, err
	}
	return []release{{name: m.Release, change: m.To}}, nil
}

func (b *back) WaitHealthy(_ context.Context, env rollout.FleetEnvironment, _ time.Duration) (bool, string) {
	b.mu.Lock()
	b.calls = append(b.calls, "wait "+env.Name)
	b.mu.Unlock()
	if why := b.unhealthy[env.Name]; why != "" {
		return false, why
	}
	return true, ""
}

// A fleet goes back last wave first, each wave healthy before the one
// before it, so no environment ever runs an older commit than one it
// gates; an environment with nothing to move is already there and is not
// waited for.
func TestBackGoesLastWaveFirst(t *testing.T) {
	b := &back{}
	envs := fleetOf([]string{"dev"}, []string{"staging"}, []string{"prod"})
	moves := map[string][]rollout.Move{"prod": {{Release: "api", To: "c1"}, {Release: "db", To: "c2"}}, "dev": {{Release: "api", To: "c0"}}}
	res, err := rollout.Back[release, smoke](context.Background(), envs, moves, b, rollout.BackOptions{})
	assert.NilError(t, err)
	assert.DeepEqual(t, b.calls, []string{"back prod api to c1", "back prod db to c2", "wait prod", "back dev api to c0", "wait dev"})
	assert.DeepEqual(t, resultsOf(res), map[string]string{"prod": rollout.RolledBack, "staging": rollout.AlreadyThere, "dev": rollout.RolledBack})
	assert.Equal(t, res.Environments[0].Name, "prod", "results are in the order the rollback ran")
	assert.DeepEqual(t, res.Environments[0].ChangeIDs, map[string]string{"api": "c1", "db": "c2"})

	dry := &back{}
	res, err = rollout.Back[release, smoke](context.Background(), envs, moves, dry, rollout.BackOptions{DryRun: true})
	assert.NilError(t, err)
	assert.DeepEqual(t, dry.calls, []string{"back prod api to c1", "back prod db to c2", "back dev api to c0"})
	assert.Equal(t, res.Environments[0].Result, rollout.Planned)
}

// The first failure or unhealthy wave stops the rollback: the waves
// before it keep what they run, and a failure names the rerun.
func TestBackStopsAtTheFirstFailure(t *testing.T) {
	envs := fleetOf([]string{"dev"}, []string{"staging"}, []string{"prod"})
	moves := map[string][]rollout.Move{"prod": {{Release: "api", To: "c1"}}, "staging": {{Release: "api", To: "c1"}}, "dev": {{Release: "api", To: "c1"}}}

	b := &back{fail: map[string]error{"staging": errors.New("render: boom")}}
	res, err := rollout.Back[release, smoke](context.Background(), envs, moves, b, rollout.BackOptions{Rerun: "opm rollback deploy --group all --to abc"})
	assert.Error(t, err, "wave 1 stopped the rollback at staging; earlier waves were not rolled back")
	assert.DeepEqual(t, resultsOf(res), map[string]string{"prod": rollout.RolledBack, "staging": rollout.Failed, "dev": rollout.NotStarted})
	assert.DeepEqual(t, res.Environments[1].Next, []string{"fix what the error names and rerun: opm rollback deploy --group all --to abc"})

	b = &back{unhealthy: map[string]string{"prod": "Deployment/api: ImagePullBackOff"}}
	res, err = rollout.Back[release, smoke](context.Background(), envs, moves, b, rollout.BackOptions{})
	assert.Error(t, err, "wave 2 stopped the rollback at prod (unhealthy); earlier waves were not rolled back")
	assert.Equal(t, res.Environments[0].Error, "Deployment/api: ImagePullBackOff")
	assert.DeepEqual(t, b.calls, []string{"back prod api to c1", "wait prod"})
}
