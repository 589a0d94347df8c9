package report

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline"
)

// A release's summary line names its environment, so the lines of a
// wave's environments applied in parallel can be told apart; a release
// rendered without an environment reads as before.
func TestAppliedLineNamesTheEnvironment(t *testing.T) {
	r := pipeline.AppliedRelease{RenderedRelease: pipeline.RenderedRelease{Name: "api", Environment: "prod-eu"}, Operation: "apply",
		Cluster: pipeline.ClusterRef{Server: "https://eu.example", Context: "eu"}}
	assert.Assert(t, strings.HasPrefix(AppliedLine(r), "release api (environment prod-eu) applied on context eu (https://eu.example)"), AppliedLine(r))
	r.Environment = ""
	assert.Assert(t, strings.HasPrefix(AppliedLine(r), "release api applied on context eu"), AppliedLine(r))
	r.Environment, r.Cluster, r.Error = "prod-us", pipeline.ClusterRef{}, "no such context"
	assert.Equal(t, AppliedLine(r), "release api (environment prod-us): apply not attempted, its cluster could not be selected")
}
