package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// planes starts n more control planes besides the package's (on a kind
// cluster in CI they are that one cluster again).
func planes(t *testing.T, n int) []*kubetest.Env {
	t.Helper()
	out := []*kubetest.Env{env.Env(t)}
	for range n {
		p, err := kubetest.Start()
		assert.NilError(t, err)
		t.Cleanup(func() { _ = p.Stop() })
		out = append(out, p)
	}
	return out
}

func results(res *pipeline.RolloutResult) map[string]string {
	out := map[string]string{}
	for _, e := range res.Environments {
		out[e.Name] = e.Result
	}
	return out
}

// neverApplied checks that nothing of the release reached plane p.
func neverApplied(t *testing.T, dir, envName string) {
	t.Helper()
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: envName}}})
	if err == nil {
		for _, r := range st.Releases {
			assert.Equal(t, r.ChangeID, "", "%s was applied", envName)
		}
	}
}

// A fleet on three control planes: staging (wave 0), a canary (wave 1)
// and production (wave 2, gated by the canary). The canary's Deployment
// never becomes healthy: wave 1 stops the rollout and production's plane
// is untouched. The gate refuses production alone until the canary runs
// the commit healthy; once the canary is fixed, a second run continues
// and production follows.
func TestRolloutWavesGatesAndACanaryThatNeverBecomesHealthy(t *testing.T) {
	ps := planes(t, 2)
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: staging: {namespace: %[1]q, group: "staging", cluster: kubeConfig: %[2]q}
environments: canary: {namespace: %[1]q, group: "production", cluster: kubeConfig: %[3]q, rollout: wave: 1, values: broken: true}
environments: prod: {namespace: %[1]q, group: "production", cluster: kubeConfig: %[4]q, rollout: {wave: 2, after: ["canary"]}}
releases: app: #module: appmodule
`, ns, ps[0].Kubeconfig, ps[1].Kubeconfig, ps[2].Kubeconfig))
	gitRun(t, dir, "init", "-q", "-b", "main")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "fleet")
	for _, p := range ps[1:] {
		p.Namespace(t) // the planes exist; the release's namespace is created by apply
	}
	opts := func(envSel string) pipeline.RolloutOptions {
		return pipeline.RolloutOptions{ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: envSel}},
			Timeout: 8 * time.Second}
	}

	// The plan: sorted by wave, gates expanded.
	fl, err := pipeline.Fleet(t.Context(), pipeline.Selection{Dir: dir, Environment: "staging,production"})
	assert.NilError(t, err)
	assert.DeepEqual(t, names(fl), []string{"staging", "canary", "prod"})

	// Production alone: its gate (the canary) has never run anything.
	res, err := pipeline.Rollout(t.Context(), opts("prod"))
	assert.Equal(t, fault.KindOf(err), fault.Gate, "%v", err)
	assert.DeepEqual(t, results(res), map[string]string{"prod": pipeline.RolloutGated})
	assert.ErrorContains(t, err, "wave 2 stopped the rollout at prod (gated)")
	refusal := res.Environments[0].Error
	assert.Check(t, strings.Contains(refusal, "app in canary has never been applied\n"), refusal)
	assert.Check(t, !strings.Contains(refusal, "healthy\n"), "a release never applied has no health to report: %s", refusal)
	assert.Check(t, !strings.Contains(err.Error(), "never been applied"), "the refusal is printed once, under the table, not again in the error: %v", err)
	neverApplied(t, dir, "prod")

	// The whole fleet: staging is applied and healthy, the canary stays
	// unhealthy, production is not started.
	res, err = pipeline.Rollout(t.Context(), opts("staging,production"))
	assert.ErrorContains(t, err, "wave 1 stopped the rollout")
	assert.DeepEqual(t, results(res), map[string]string{"staging": pipeline.RolloutApplied, "canary": pipeline.RolloutUnhealthy, "prod": pipeline.RolloutNotStarted})
	neverApplied(t, dir, "prod")
	table := report.RolloutTable(res)
	assert.Assert(t, contains(table, "canary       1     production"), table)
	assert.Check(t, contains(table, "ImagePullBackOff") || contains(table, "FailedCreate"), "the canary says why it is unhealthy:\n%s", table)
	assert.Check(t, contains(table, "next: fix forward: commit a fix and rerun: opm apply "+dir+" --env canary"), table)

	// The canary is fixed in a new commit; the second run continues.
	setValues(t, dir, `values: broken: true`, `values: broken: false`)
	gitRun(t, dir, "commit", "-qam", "fix the canary")
	res, err = pipeline.Rollout(t.Context(), opts("staging,production"))
	assert.NilError(t, err)
	assert.DeepEqual(t, results(res), map[string]string{"staging": pipeline.RolloutApplied, "canary": pipeline.RolloutApplied, "prod": pipeline.RolloutApplied})
	head := gitRun(t, dir, "rev-parse", "HEAD")
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "prod"}}})
	assert.NilError(t, err)
	assert.Equal(t, st.Releases[0].Source.Commit, head)

	// Uncommitted changes never pass a gate; --skip-gates does, recorded.
	setValues(t, dir, `releases: app: #module: appmodule`, `releases: app: {#module: appmodule, values: stamp: "hotfix"}`)
	res, err = pipeline.Rollout(t.Context(), opts("prod"))
	assert.Equal(t, fault.KindOf(err), fault.Gate)
	assert.Check(t, contains(res.Environments[0].Error, "uncommitted changes"), res.Environments[0].Error)
	skip := opts("prod")
	skip.SkipGates, skip.SkippedBy, skip.NoWait = true, "alice", true
	_, err = pipeline.Rollout(t.Context(), skip)
	assert.NilError(t, err)
	st, err = pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: "prod"}}})
	assert.NilError(t, err)
	assert.Equal(t, st.Releases[0].Source.GatesSkippedBy, "alice")
}

func names(envs []pipeline.FleetEnvironment) (out []string) {
	for _, e := range envs {
		out = append(out, e.Name)
	}
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// With Smoke, each environment of a healthy wave is smoke-tested on its
// own cluster (not the one in ClusterOptions) in a throwaway namespace,
// which is gone afterwards, before the next wave.
func TestRolloutSmokeTestsEachWaveOnItsOwnCluster(t *testing.T) {
	ps := planes(t, 1)
	ns := env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: staging: {namespace: %[1]q, group: "fleet", cluster: kubeConfig: %[2]q}
environments: prod: {namespace: %[1]q, group: "fleet", cluster: kubeConfig: %[3]q, rollout: wave: 1}
releases: app: #module: appmodule
`, ns, ps[0].Kubeconfig, ps[1].Kubeconfig))
	res, err := pipeline.Rollout(t.Context(), pipeline.RolloutOptions{
		ApplyOptions: pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Group: "fleet"}},
		Timeout:      20 * time.Second, Smoke: true,
	})
	assert.NilError(t, err)
	assert.DeepEqual(t, results(res), map[string]string{"staging": pipeline.RolloutApplied, "prod": pipeline.RolloutApplied})
	for i, e := range res.Environments {
		assert.Assert(t, e.Smoke != nil, "%s was not smoke-tested", e.Name)
		assert.Check(t, e.Smoke.Passed, report.SmokeText(e.Smoke))
		assert.Equal(t, strings.TrimSuffix(e.Smoke.Cluster.Server, "/"), strings.TrimSuffix(ps[i].Config.Host, "/"), "%s smoke-tested on the wrong cluster", e.Name)
		assert.Equal(t, len(e.Smoke.Releases), 1)
		r := e.Smoke.Releases[0]
		assert.Check(t, r.Namespace != ns && strings.HasPrefix(r.Namespace, "opm-smoke-app-"), r.Namespace)
		// The release itself is still where the rollout put it.
		st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, Environment: e.Name}}})
		assert.NilError(t, err)
		assert.Check(t, st.Healthy && st.Releases[0].ChangeID != "")
	}
	assert.Assert(t, contains(report.RolloutTable(res), "applied"))
}

// opm smoke on a group tests every environment's releases in rollout
// order on the one throwaway cluster it is given.
func TestSmokeOfAGroupTestsEachEnvironment(t *testing.T) {
	dir := deploytest.HealthyDir(t, `
environments: a: {namespace: "app-a", group: "g"}
environments: b: {namespace: "app-b", group: "g", rollout: wave: 1}
releases: app: #module: appmodule
`)
	res, err := pipeline.Smoke(t.Context(), pipeline.SmokeOptions{
		Selection: pipeline.Selection{Dir: dir, Group: "g"}, ClusterOptions: cluster(t),
		Timeout: 30 * time.Second, Interval: 200 * time.Millisecond, NamespacePrefix: "smoke-group",
	})
	assert.NilError(t, err)
	assert.Check(t, res.Passed, report.SmokeText(res))
	var envs []string
	for _, r := range res.Releases {
		envs = append(envs, r.Environment)
		assert.Check(t, strings.HasPrefix(r.Namespace, "smoke-group-"), r.Namespace)
	}
	assert.DeepEqual(t, envs, []string{"a", "b"})
}
