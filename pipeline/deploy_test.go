package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// Deploy is how every front door applies: one environment is applied
// (Apply's result, waited for), a group rolled out wave by wave (Rollout's
// result, one entry per environment), and an environment whose gate its
// predecessor has not passed is refused by Apply's own gate check, which
// reads the environment Deploy found instead of the fleet again.
func TestDeployRoutesOneEnvironmentToApplyAndAFleetToRollout(t *testing.T) {
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	dir := deploytest.HealthyDir(t, fmt.Sprintf(`
environments: a: {namespace: %[1]q, group: "g", cluster: kubeConfig: %[3]q}
environments: b: {namespace: %[2]q, group: "g", cluster: kubeConfig: %[3]q, rollout: wave: 1}
environments: c: {namespace: %[2]q, cluster: kubeConfig: %[3]q, rollout: after: ["nowhere"]}
environments: nowhere: {namespace: %[1]q, cluster: kubeConfig: %[3]q}
releases: app: #module: appmodule
`, nsA, nsB, env.Kubeconfig()))
	deploy := func(sel pipeline.Selection) (*pipeline.DeployResult, error) {
		sel.Dir = dir
		return pipeline.Deploy(t.Context(), pipeline.RolloutOptions{ApplyOptions: pipeline.ApplyOptions{Selection: sel}, Timeout: time.Minute})
	}

	one, err := deploy(pipeline.Selection{Environment: "a"})
	assert.NilError(t, err)
	assert.Assert(t, one.Apply != nil && one.Rollout == nil, "one environment is Apply's")
	assert.Equal(t, len(one.Apply.Releases), 1)
	assert.Equal(t, one.Apply.Releases[0].Namespace, nsA)

	fleet, err := deploy(pipeline.Selection{Group: "g"})
	assert.NilError(t, err)
	assert.Assert(t, fleet.Rollout != nil && fleet.Apply == nil, "a group is Rollout's")
	var got []string
	for _, e := range fleet.Rollout.Environments {
		got = append(got, e.Name+"="+e.Result)
	}
	assert.DeepEqual(t, got, []string{"a=" + pipeline.RolloutApplied, "b=" + pipeline.RolloutApplied})

	_, err = deploy(pipeline.Selection{Environment: "c"})
	assert.Equal(t, fault.KindOf(err), fault.Gate, "%v", err)
}
