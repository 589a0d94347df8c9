package pipeline_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// noAgeKeys hides any age key of the machine running the tests.
func noAgeKeys(t *testing.T) {
	t.Helper()
	for _, env := range []string{"SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "SOPS_AGE_KEY_CMD"} {
		t.Setenv(env, "")
		assert.NilError(t, os.Unsetenv(env))
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

func renderProduction(t *testing.T, sel pipeline.Selection) (pipeline.RenderedRelease, error) {
	t.Helper()
	sel.Environment = "production"
	res, err := pipeline.Render(context.Background(), pipeline.RenderOptions{Selection: sel})
	if err != nil {
		return pipeline.RenderedRelease{}, err
	}
	assert.Equal(t, len(res.Releases), 1)
	return res.Releases[0], nil
}

func objectOf(t *testing.T, r pipeline.RenderedRelease, kind string) map[string]any {
	t.Helper()
	for _, o := range r.Resources {
		if o["kind"] == kind {
			return o
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

// The environment's valuesFiles entry is decrypted in memory: the objects
// carry the plaintext (render is the operator's view, as `sops -d`), the
// values and valuesText show keys with masked values, and the change ID
// is recomputable from what render prints.
func TestEnvironmentSopsValuesFileRenders(t *testing.T) {
	noAgeKeys(t)
	dir := deploytest.SopsDir(t, "prod", "")
	for name, sel := range map[string]pipeline.Selection{
		"key handed over": {Dir: dir, AgeKeys: []string{deploytest.SopsAgeKey()}},
		"SOPS_AGE_KEY":    {Dir: dir},
	} {
		t.Run(name, func(t *testing.T) {
			if sel.AgeKeys == nil {
				t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
			}
			r, err := renderProduction(t, sel)
			assert.NilError(t, err)
			data := objectOf(t, r, "Secret")["data"].(map[string]any)
			assert.Equal(t, data["password"], base64.StdEncoding.EncodeToString([]byte(deploytest.SopsPIN)))
			assert.Equal(t, objectOf(t, r, "ConfigMap")["data"].(map[string]any)["api-token"], deploytest.SopsToken)
			for _, shown := range []string{string(r.Values), r.ValuesText} {
				assert.Assert(t, is.Contains(shown, "(secret)"))
				assert.Assert(t, !strings.Contains(shown, deploytest.SopsPIN) && !strings.Contains(shown, deploytest.SopsToken), shown)
			}
			assert.Assert(t, r.Sensitive)
			assert.Equal(t, r.ChangeID, manifest.ChangeID(r.Module.Path, r.Module.Version, r.ValuesText, r.ManifestDigest))
		})
	}
}

func TestValuesFilesErrorsNameTheEntry(t *testing.T) {
	noAgeKeys(t)
	t.Run("no key", func(t *testing.T) {
		_, err := renderProduction(t, pipeline.Selection{Dir: deploytest.SopsDir(t, "prod", "")})
		assert.Equal(t, fault.KindOf(err), fault.Configuration, "%v", err)
		assert.ErrorContains(t, err, `environment "production", valuesFiles entry "secrets/production.sops.yaml" (at `)
		assert.ErrorContains(t, err, "deploy.cue:")
		assert.ErrorContains(t, err, "SOPS_AGE_KEY (unset)")
	})
	t.Run("missing file", func(t *testing.T) {
		dir := deploytest.SopsDir(t, "prod", "")
		assert.NilError(t, os.Remove(filepath.Join(dir, "secrets/production.sops.yaml")))
		_, err := renderProduction(t, pipeline.Selection{Dir: dir, AgeKeys: []string{deploytest.SopsAgeKey()}})
		assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
		assert.ErrorContains(t, err, `valuesFiles entry "secrets/production.sops.yaml"`)
		assert.ErrorContains(t, err, "no such file")
	})
	t.Run("tampered", func(t *testing.T) {
		dir := deploytest.SopsDir(t, "prod", "")
		dropLines(t, filepath.Join(dir, "secrets/production.sops.yaml"), "secret:")
		_, err := renderProduction(t, pipeline.Selection{Dir: dir, AgeKeys: []string{deploytest.SopsAgeKey()}})
		assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
		assert.ErrorContains(t, err, "MAC mismatch")
	})
	t.Run("mac removed", func(t *testing.T) {
		// sops' own no_mac.yaml: read as plaintext before, its sops map
		// and ENC[…] strings became values.
		dir := deploytest.SopsDir(t, "prod", "")
		dropLines(t, filepath.Join(dir, "secrets/production.sops.yaml"), "mac:")
		_, err := renderProduction(t, pipeline.Selection{Dir: dir, AgeKeys: []string{deploytest.SopsAgeKey()}})
		assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
		assert.ErrorContains(t, err, "secrets/production.sops.yaml carries sops metadata but no MAC")
	})
	t.Run("plaintext named as sops", func(t *testing.T) {
		dir := deploytest.SopsDir(t, "prod", "")
		assert.NilError(t, os.WriteFile(filepath.Join(dir, "secrets/production.sops.yaml"), []byte("secret: in-the-clear\n"), 0o644))
		_, err := renderProduction(t, pipeline.Selection{Dir: dir})
		assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
		assert.ErrorContains(t, err, "is not encrypted, but its name ends in .sops.yaml")
	})
}

// A secret value that does not satisfy #config is reported by path and
// file, and the error does not quote it.
func TestSecretValueErrorsDoNotQuoteIt(t *testing.T) {
	dir := deploytest.SopsDir(t, "prod", "")
	_, err := renderProduction(t, pipeline.Selection{Dir: dir, SecretValues: []pipeline.SecretValues{{Name: "values-secret", Data: []byte(`{"replicas": "pin-8830"}`)}}})
	assert.Assert(t, err != nil)
	assert.Equal(t, fault.KindOf(err), fault.Configuration, "no key for the env file: %v", err)

	dir = deploytest.Dir(t, "prod", "")
	_, err = pipeline.Render(context.Background(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: dir,
		SecretValues: []pipeline.SecretValues{{Name: "values-secret", Data: []byte(`{"replicas": "pin-8830"}`)}}}})
	assert.ErrorContains(t, err, "values.replicas")
	assert.ErrorContains(t, err, `file "values-secret"`)
	assert.Assert(t, !strings.Contains(err.Error(), "pin-8830"), "%v", err)
}

// Per-release lists: a map from release key to files; a release with no
// entry gets none.
func TestValuesFilesPerRelease(t *testing.T) {
	files := map[string]string{
		"secrets/app.yaml": "secret: per-release-1\n",
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
environments: production: {namespace: "prod", valuesFiles: app: ["secrets/app.yaml"]}
releases: app: #module: appmodule
releases: other: {#module: appmodule, values: name: "other"}
`,
	}
	res, err := pipeline.Render(context.Background(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: deploytest.Write(t, files), Environment: "production"}})
	assert.NilError(t, err)
	secrets := map[string]any{}
	for _, r := range res.Releases {
		for _, o := range r.Resources {
			if o["kind"] == "Secret" {
				secrets[r.Name] = o["data"].(map[string]any)["password"]
			}
		}
	}
	assert.DeepEqual(t, secrets, map[string]any{
		"app":   base64.StdEncoding.EncodeToString([]byte("per-release-1")),
		"other": base64.StdEncoding.EncodeToString([]byte("s3cret")),
	})
}

// The guessing oracle, tried as an attacker would: with the repository
// (everything but the PIN) and the published review, render the release
// for each of the 10 000 PINs and look for its digest or change ID in
// the review. Unsealed, the published identifiers confirm exactly the
// real PIN (so the attack works); sealed, no candidate is confirmed.
func TestPublishedReviewConfirmsNoPINGuess(t *testing.T) {
	noAgeKeys(t)
	head := deploytest.SopsDir(t, "prod", "")
	cs, err := pipeline.Review(context.Background(), pipeline.ReviewOptions{
		Selection:    pipeline.Selection{Dir: head, AgeKeys: []string{deploytest.SopsAgeKey()}},
		BaseDir:      filepath.Join(t.TempDir(), "absent"),
		Environments: []string{"production"},
	})
	assert.NilError(t, err)
	assert.Assert(t, cs.Releases[0].Sensitive)
	opts := report.ReportMarkdownOptions("")
	unsealed := report.Markdown(cs, opts)
	published := report.Markdown(cs.Sealed(pipeline.NewSealer("")), opts)
	for _, v := range []string{deploytest.SopsPIN, deploytest.SopsToken, base64.StdEncoding.EncodeToString([]byte(deploytest.SopsPIN))} {
		assert.Assert(t, !deploytest.Shows(published, v), "the review shows %q", v)
	}

	// What the attacker computes per guess: the release rendered with that
	// PIN. Rendering 10 000 times would take minutes, so the guess is put
	// into a render in place of the PIN, which is the same thing (checked
	// against a real render of one guess below).
	r, err := renderProduction(t, pipeline.Selection{Dir: head, AgeKeys: []string{deploytest.SopsAgeKey()}})
	assert.NilError(t, err)
	guess := func(pin string) (digest, changeID string) {
		var rs []manifest.Resource
		for _, o := range r.Resources {
			b, err := json.Marshal(o)
			assert.NilError(t, err)
			s := strings.ReplaceAll(string(b), base64.StdEncoding.EncodeToString([]byte(deploytest.SopsPIN)), base64.StdEncoding.EncodeToString([]byte(pin)))
			u := &unstructured.Unstructured{}
			assert.NilError(t, u.UnmarshalJSON([]byte(s)))
			rs = append(rs, manifest.Resource{Object: u})
		}
		digest, err := manifest.Digest(rs)
		assert.NilError(t, err)
		// valuesText masks the PIN, so it is the same for every guess.
		return digest, manifest.ChangeID(r.Module.Path, r.Module.Version, r.ValuesText, digest)
	}
	plainDir := deploytest.Write(t, map[string]string{"deploy.cue": strings.Replace(
		mustRead(t, filepath.Join(head, "deploy.cue")), `valuesFiles: ["secrets/production.sops.yaml"]`,
		fmt.Sprintf(`values: {secret: "0815", config: "api-token": %q}`, deploytest.SopsToken), 1)})
	real, err := renderProduction(t, pipeline.Selection{Dir: plainDir})
	assert.NilError(t, err)
	d, _ := guess("0815")
	assert.Equal(t, d, real.ManifestDigest, "the shortcut is not what a render of the guess gives")

	confirmed := func(md string) (pins []string) {
		for i := range 10000 {
			pin := fmt.Sprintf("%04d", i)
			d, id := guess(pin)
			if strings.Contains(md, report.ShortDigest(d)) || strings.Contains(md, id) {
				pins = append(pins, pin)
			}
		}
		return pins
	}
	assert.DeepEqual(t, confirmed(unsealed), []string{deploytest.SopsPIN})
	assert.DeepEqual(t, confirmed(published), []string(nil))
	assert.Assert(t, is.Contains(published, manifest.SealedChangePrefix))
	assert.Assert(t, is.Contains(published, "hmac:"))
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	return string(b)
}

// What persists (a Dagger File) carries no decrypted value; the digest is
// still the render's.
func TestWithoutSecretValuesForPersistentOutputs(t *testing.T) {
	noAgeKeys(t)
	res, err := pipeline.Render(context.Background(), pipeline.RenderOptions{Selection: pipeline.Selection{
		Dir: deploytest.SopsDir(t, "prod", ""), Environment: "production", AgeKeys: []string{deploytest.SopsAgeKey()}}})
	assert.NilError(t, err)
	safe := res.WithoutSecretValues()
	y, err := safe.YAML()
	assert.NilError(t, err)
	b, err := json.Marshal(safe)
	assert.NilError(t, err)
	for _, v := range []string{deploytest.SopsPIN, deploytest.SopsToken, strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(deploytest.SopsPIN)), "=")} {
		assert.Assert(t, !deploytest.Shows(string(y)+string(b), v), "shows %q", v)
	}
	assert.Equal(t, safe.Digest(), res.Digest())
	orig, err := res.YAML()
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(orig), deploytest.SopsToken), "render itself still shows the operator everything")
}

// The API server quotes the value it refuses. A secret shorter than the
// redactor's 8 characters, or a number, is still never printed: apply's
// error masks the release's secrets as whole tokens (docs/secrets.md
// promises "(secret)").
func TestAPIRefusalOfAShortSecretIsMasked(t *testing.T) {
	for name, tc := range map[string]struct{ secret, public, leak string }{
		"a short string": {secret: `{"name": "Ab3x9Q"}`, public: `port: 80`, leak: "Ab3x9Q"},
		"a number":       {secret: `{"port": 70123}`, public: `name: "http"`, leak: "70123"},
	} {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			dir := deploytest.Write(t, map[string]string{"deploy.cue": fmt.Sprintf(`package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

environments: prod: core.#Environment & {metadata: name: "prod", namespace: %q}
releases: web: core.#ModuleRelease & {
	metadata: name: "web"
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/short/web@v0", name: "web", version: "0.1.0"}
		#config: {name: string, port: int}
		#components: svc: {
			core.#Objects
			spec: objects: [{apiVersion: "v1", kind: "Service", metadata: name: "web", spec: ports: [{name: #config.name, port: #config.port}]}]
		}
	}
	values: %s
}
`, ns, tc.public)})
			var progress strings.Builder
			res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, Environment: "prod",
				SecretValues: []pipeline.SecretValues{{Name: "values-secret", Data: []byte(tc.secret)}}}, ClusterOptions: cluster(t),
				Progress: func(e pipeline.ProgressEvent) { progress.WriteString(e.Line() + "\n") }})
			assert.Assert(t, err != nil, "the API server accepted it")
			assert.Check(t, strings.Contains(err.Error(), "Invalid value: (secret)"), "%v", err)
			whole, _ := json.Marshal(res)
			assert.Check(t, strings.Contains(progress.String(), "(secret)"), "no progress line for the refused object: %q", progress.String())
			for _, text := range []string{err.Error(), res.Releases[0].Error, string(whole), progress.String()} {
				assert.Check(t, !strings.Contains(text, tc.leak), "the secret leaked: %s", text)
			}
		})
	}
}

// dropLines removes from the file at p every line that starts, after its
// indentation, with prefix: an edit made without sops.
func dropLines(t *testing.T, p, prefix string) {
	t.Helper()
	b, err := os.ReadFile(p)
	assert.NilError(t, err)
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), prefix) {
			kept = append(kept, l)
		}
	}
	assert.NilError(t, os.WriteFile(p, []byte(strings.Join(kept, "\n")), 0o644))
}
