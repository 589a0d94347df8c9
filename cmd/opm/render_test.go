package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/pipeline"
)

func runOpm(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runOpmIn(t.Context(), args...)
}

// runOpmIn runs opm with ctx (withEnv gives it an environment of its own).
func runOpmIn(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
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

// Anyone can check a render's identity from its JSON alone: the manifest
// digest is SHA-256 over each resource's JSON (sorted keys) in the order
// printed, newline-separated; the change ID is the first 8 hex of SHA-1
// over module path + module version + valuesText + manifest digest.
// Recomputed here with nothing but the standard library.
func TestRenderJSONRecomputesDigestAndChangeID(t *testing.T) {
	code, out, errOut := runOpm(t, "render", "../../examples", "-e", "staging", "-o", "json")
	assert.Equal(t, code, 0, errOut)
	var doc struct {
		Releases []struct {
			Name           string
			Module         struct{ Path, Version string }
			ValuesText     string
			ManifestDigest string
			ChangeID       string
			Resources      []json.RawMessage
		}
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &doc))
	assert.Equal(t, len(doc.Releases), 2)
	for _, r := range doc.Releases {
		assert.Check(t, is.Contains(r.ValuesText, "image:"), "%s: valuesText is the CUE text of the values", r.Name)
		h := sha256.New()
		for i, raw := range r.Resources {
			// Decode with exact numbers and encode again: encoding/json
			// sorts map keys, as the digest's definition says.
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var obj map[string]any
			assert.NilError(t, dec.Decode(&obj))
			b, err := json.Marshal(obj)
			assert.NilError(t, err)
			if i > 0 {
				h.Write([]byte{'\n'})
			}
			h.Write(b)
		}
		digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
		assert.Equal(t, digest, r.ManifestDigest, "%s: manifest digest", r.Name)

		sum := sha1.Sum([]byte(r.Module.Path + r.Module.Version + r.ValuesText + digest))
		assert.Equal(t, "change-sha1-"+hex.EncodeToString(sum[:])[:8], r.ChangeID, "%s: change ID", r.Name)
	}
}

// -f - reads the values from standard input (after the files), in the
// format --values-format names or, by default, JSON or YAML by content; a
// path without an extension (a pipe, -f <(sops -d …)) is read by content
// too. Standard input is read once: -f - twice is a usage error.
func TestValuesFromStandardInput(t *testing.T) {
	render := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := runWithInput(t.Context(), append([]string{"render", "../../examples", "--env", "staging", "-r", "blog"}, args...), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errOut := render("title: from stdin\n", "-f", "-")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "title: from stdin"), out)

	code, out, errOut = render(`{"title": "json on stdin"}`, "-f", "-")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "title: json on stdin"), out)

	code, out, errOut = render(`title: "cue " + "on stdin"`, "-f", "-", "--values-format", "cue")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "title: cue on stdin"), out)

	// Standard input is merged after the files, whatever the order of -f.
	file := filepath.Join(t.TempDir(), "v.yaml")
	assert.NilError(t, os.WriteFile(file, []byte("title: from the file\n"), 0o644))
	code, out, errOut = render("title: from stdin\n", "-f", "-", "-f", file)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "title: from stdin"), out)

	noExt := filepath.Join(t.TempDir(), "values")
	assert.NilError(t, os.WriteFile(noExt, []byte("title: no extension\n"), 0o644))
	code, out, errOut = render("", "-f", noExt)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "title: no extension"), out)

	code, _, errOut = render("title: x\n", "-f", "-", "-f", "-")
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, "-f - is given 2 times"), errOut)
	code, _, errOut = render("title: x\n", "-f", "-", "--values-format", "toml")
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, `--values-format "toml": use auto, yaml, json or cue`), errOut)
}

// On a terminal each object's line of an apply leads with how far the
// release is; elsewhere (CI logs, pipes) the line is as it always was.
func TestProgressLineCountsOnATerminal(t *testing.T) {
	e := pipeline.ProgressEvent{Release: "web", Namespace: "prod", Phase: "apply", Done: 7, Total: 120,
		Object: pipeline.ObjectChange{Ref: pipeline.ObjectRef{Version: "v1", Kind: "ConfigMap", Name: "settings"}, Action: "created"}}
	assert.Equal(t, progressLine(e, true), "[  7/120] configmap/settings created")
	assert.Equal(t, progressLine(e, false), "configmap/settings created")
	e.Total = 0 // a prune's events carry no count
	assert.Equal(t, progressLine(e, true), "configmap/settings created")
}
