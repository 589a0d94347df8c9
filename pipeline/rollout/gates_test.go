package rollout_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/pipeline/rollout"
)

// checkout is a git repository with one commit: its directory and commit.
func checkout(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "one"}} {
		if args[0] == "add" {
			assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte("package deploy\n"), 0o644))
		}
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		assert.NilError(t, err, string(out))
	}
	git := rollout.ReadGit(context.Background(), dir)
	assert.NilError(t, git.Err)
	return dir, git.Commit
}

// reads script what each gating environment runs, by "gate/release".
type reads struct {
	releases []string
	gates    map[string][]rollout.GateRelease
	errs     map[string]error
}

func (r reads) Releases(context.Context) ([]string, error) { return r.releases, nil }

func (r reads) Gate(_ context.Context, gate, key string) ([]rollout.GateRelease, error) {
	return r.gates[gate+"/"+key], r.errs[gate+"/"+key]
}

// A gate opens only for the very commit, run healthy (and soaked) in every
// gating environment; each refusal names one fact and the next command.
func TestGatesCompareTheCommitEachGatingEnvironmentRuns(t *testing.T) {
	ctx := context.Background()
	dir, commit := checkout(t)
	short := commit[:12]
	prod := rollout.FleetEnvironment{Name: "prod", Gates: []string{"staging"}}
	ran := func(commit string, healthy bool, since time.Time) []rollout.GateRelease {
		return []rollout.GateRelease{{ChangeID: "change-sha1-1", Source: &inventory.Source{Commit: commit}, Healthy: healthy, Since: since.Format(time.RFC3339)}}
	}
	g := rollout.Gates{Dir: dir, Shown: "my deploy"}
	long := time.Now().Add(-time.Hour)

	open := reads{releases: []string{"api", "db"}, gates: map[string][]rollout.GateRelease{"staging/api": ran(commit, true, long)},
		errs: map[string]error{"staging/db": fault.Validationf("release db is not declared in staging")}}
	assert.NilError(t, g.Wait(ctx, prod, open), "a release the gating environment does not declare gates nothing")

	other := reads{releases: []string{"api"}, gates: map[string][]rollout.GateRelease{"staging/api": ran("0123456789abcdef0123", true, long)}}
	err := g.Wait(ctx, prod, other)
	assert.Equal(t, fault.KindOf(err), fault.Gate)
	assert.Error(t, err, "environment prod may only get commit "+short+" once staging has run it healthy:\n"+
		"  api in staging runs commit 0123456789ab, change change-sha1-1 (healthy)\n"+
		"next: opm apply 'my deploy' --env staging   # then rerun, or wait here with --gate-timeout 30m (--skip-gates skips them, recorded)")

	broken := reads{releases: []string{"api"}, gates: map[string][]rollout.GateRelease{"staging/api": ran(commit, false, long)}}
	err = g.Wait(ctx, prod, broken)
	assert.ErrorContains(t, err, "api in staging runs commit "+short+", change change-sha1-1, but is not healthy\nnext: opm status 'my deploy' --env staging   # why it is not healthy")

	soaking := rollout.FleetEnvironment{Name: "prod", Gates: []string{"staging"}, GateSoaks: map[string]time.Duration{"staging": time.Hour}}
	young := reads{releases: []string{"api"}, gates: map[string][]rollout.GateRelease{"staging/api": ran(commit, true, time.Now().Add(-20*time.Minute-30*time.Second))}}
	err = g.Wait(ctx, soaking, young)
	assert.ErrorContains(t, err, "once staging has run it healthy for its soak")
	assert.ErrorContains(t, err, "the soak has 39m")
	assert.ErrorContains(t, err, "left; wait for it here with --gate-timeout 41m0s, or rerun then")

	never := reads{releases: []string{"api"}, gates: map[string][]rollout.GateRelease{"staging/api": {{}}}}
	assert.ErrorContains(t, g.Wait(ctx, prod, never), "api in staging has never been applied")

	unread := reads{releases: []string{"api"}, errs: map[string]error{"staging/api": errors.New("connection refused")}}
	assert.ErrorContains(t, g.Wait(ctx, prod, unread), "api in staging: cannot be read: connection refused")
}

// A directory outside git, or with uncommitted changes, never passes a
// gate, and is refused at once even with a gate timeout.
func TestGatesRefuseWhatNoCommitHolds(t *testing.T) {
	ctx := context.Background()
	prod := rollout.FleetEnvironment{Name: "prod", Gates: []string{"staging"}}
	some := reads{releases: []string{"api"}}

	err := rollout.Gates{Dir: t.TempDir(), Timeout: time.Hour}.Wait(ctx, prod, some)
	assert.Equal(t, fault.KindOf(err), fault.Gate)
	assert.ErrorContains(t, err, "the deployment directory must be a git checkout")

	dir, _ := checkout(t)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte("package deploy\nx: 1\n"), 0o644))
	err = rollout.Gates{Dir: dir, Timeout: time.Hour}.Wait(ctx, prod, some)
	assert.Assert(t, strings.Contains(err.Error(), "has uncommitted changes, which no gating environment can have run"), err)
}
