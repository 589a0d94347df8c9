package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"sigs.k8s.io/yaml"
)

func runOpm(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRenderYAMLOnStdoutSummaryOnStderr(t *testing.T) {
	code, out, errOut := runOpm(t, "render", "../../examples", "--env", "staging")
	assert.Equal(t, code, 0, errOut)
	docs := strings.Split(strings.TrimPrefix(out, "---\n"), "\n---\n")
	assert.Equal(t, len(docs), 8)
	for _, d := range docs {
		var obj map[string]any
		assert.NilError(t, yaml.Unmarshal([]byte(d), &obj), "stdout holds only manifests")
		assert.Check(t, obj["kind"] != nil)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	assert.Equal(t, len(lines), 2)
	assert.Check(t, is.Contains(lines[0], "release blog env=staging namespace=staging"))
	assert.Check(t, is.Contains(lines[1], "release minecraft env=staging"))
}

func TestRenderJSON(t *testing.T) {
	code, out, errOut := runOpm(t, "render", "../../examples", "-e", "production", "-r", "blog", "-o", "json")
	assert.Equal(t, code, 0, errOut)
	var doc struct {
		Releases []struct {
			Name, Environment, ChangeID string
			Resources                   []map[string]any
		}
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &doc))
	assert.Equal(t, len(doc.Releases), 1)
	assert.Equal(t, doc.Releases[0].Environment, "production")
	assert.Equal(t, len(doc.Releases[0].Resources), 5)
	assert.Check(t, strings.HasPrefix(doc.Releases[0].ChangeID, "change-sha1-"))
}

func TestRenderBadInputExitsTwo(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown environment": {"render", "../../examples", "--env", "qa"},
		"missing directory":   {"render", "does-not-exist"},
		"unknown release":     {"render", "../../examples", "--env", "staging", "-r", "nope"},
		"bad output":          {"render", "../../examples", "-o", "toml"},
		"unknown flag":        {"render", "--bogus"},
		"two directories":     {"render", "a", "b"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runOpm(t, args...)
			assert.Equal(t, code, 2, errOut)
			assert.Equal(t, out, "", "nothing on stdout on error")
			assert.Check(t, is.Contains(errOut, "Error: "))
		})
	}
}
