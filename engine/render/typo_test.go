package render_test

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// A misspelled required field (`tpye:` for `type:`) is named once, with
// the misspelling it sits beside, not five times as CUE reports it.
func TestMisspelledRequiredFieldIsNamed(t *testing.T) {
	dir := deploytest.Write(t, map[string]string{
		"app/app.cue": `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module
metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}
#components: web: {
	core.#Workload
	spec: workload: {tpye: "stateless", container: image: "nginx:1.27"}
}
`,
		"deploy.cue": deploytest.Header + `
environments: dev: namespace: "dev"
releases: app: #module: appmodule
`,
	})
	err := renderErr(t, dir, "dev")
	msg := err.Error()
	assert.Equal(t, strings.Count(msg, "required field missing: type"), 1, msg)
	assert.Check(t, is.Contains(msg, `sets "tpye"`), msg)
	assert.Check(t, is.Contains(msg, `did you mean "type"?`), msg)
	assert.Check(t, is.Contains(msg, "app/app.cue:9:"), msg)
}
