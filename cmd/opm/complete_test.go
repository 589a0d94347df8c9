package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// completions asks opm what the shell would offer for the last argument
// (cobra's __complete, which the bash, zsh and fish scripts call).
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errOut := runOpm(t, append([]string{"__complete"}, args...)...)
	assert.Equal(t, code, 0, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Assert(t, len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], ":"), "no directive: %q", out)
	return lines[:len(lines)-1]
}

// Value flags complete from the deployment directory given as DIR (or
// the working directory), -o from what each command accepts, --context
// from the kubeconfig.
func TestShellCompletionOffersValues(t *testing.T) {
	fleet := deploytest.HealthyDir(t, `
environments: qa: {namespace: "qa", group: "pre"}
environments: eu: {namespace: "eu", group: "production"}
releases: app: #module: appmodule
releases: web: #module: appmodule
`)
	assert.DeepEqual(t, completions(t, "render", "../../examples", "--env", ""), []string{"production", "staging"})
	assert.DeepEqual(t, completions(t, "apply", fleet, "--env", ""), []string{"eu", "qa", "pre", "production"})
	assert.DeepEqual(t, completions(t, "status", fleet, "--group", ""), []string{"pre", "production"})
	assert.DeepEqual(t, completions(t, "diff", fleet, "--release", ""), []string{"app", "web"})
	// DIR after the release argument.
	assert.DeepEqual(t, completions(t, "history", "app", fleet, "--env", ""), []string{"eu", "qa", "pre", "production"})
	assert.DeepEqual(t, completions(t, "status", fleet, "-o", ""), []string{"table", "json", "yaml", "markdown"})
	assert.DeepEqual(t, completions(t, "render", fleet, "-o", ""), []string{"yaml", "json"})
	assert.DeepEqual(t, completions(t, "status", fleet, "--kubeconfig", env.Kubeconfig, "--context", ""), []string{"opm-test"})
	// Every -o flag's help lists its formats the way completion reads them.
	root := newRoot(nil, nil)
	for _, c := range root.Commands() {
		if f := c.Flags().Lookup("output"); f != nil {
			assert.Check(t, len(formatsOf(f.Usage)) >= 2, "opm %s -o: %q lists no formats", c.Name(), f.Usage)
			assert.Check(t, strings.Contains(fmt.Sprint(formatsOf(f.Usage)), f.DefValue), "opm %s -o: the default %q is not among %v", c.Name(), f.DefValue, formatsOf(f.Usage))
		}
	}
}

// Every command's -o is checked by one rule, against the formats its help
// (and completion) lists: each listed format passes, anything else is a
// usage error naming them.
func TestEveryOutputFlagIsCheckedAgainstItsFormats(t *testing.T) {
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		f := c.Flags().Lookup("output")
		if f == nil {
			return
		}
		checked++
		formats := formatsOf(f.Usage)
		assert.Assert(t, len(formats) >= 2, "%s: -o lists %v", c.CommandPath(), formats)
		for _, format := range formats {
			assert.NilError(t, f.Value.Set(format))
			assert.NilError(t, checkOutputFlag(c), "%s -o %s", c.CommandPath(), format)
		}
		assert.NilError(t, f.Value.Set("bogus"))
		err := checkOutputFlag(c)
		assert.Check(t, isUsage(err), "%s -o bogus: %v", c.CommandPath(), err)
		assert.Check(t, err != nil && strings.HasPrefix(err.Error(), "-o must be "+formats[0]), "%s: %v", c.CommandPath(), err)
	}
	walk(newRoot(io.Discard, io.Discard))
	assert.Check(t, checked >= 17, "only %d commands have -o", checked)
}
