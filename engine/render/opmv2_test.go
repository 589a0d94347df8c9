package render_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/encrypted/encryptedtest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/opmv2test"
)

// v2Deployment is a deployment directory whose releases are upstream OPM
// v2 modules from the registry, each with its debugValues, in an
// environment subscribed to catalogs/opm@v2 2.0.0-alpha.4.
func v2Deployment(t *testing.T, ns string, releases map[string]string) string {
	t.Helper()
	mods := map[string]opmv2test.Module{}
	for _, m := range opmv2test.Modules(t) {
		mods[m.Dir] = m
	}
	var deps, imports, rels strings.Builder
	for _, name := range slices.Sorted(maps.Keys(releases)) {
		m := mods[releases[name]]
		fmt.Fprintf(&deps, "\t%q: v: \"v%s\"\n", m.Path, m.Version)
		alias := strings.ReplaceAll(m.Dir, "_", "") + "mod"
		fmt.Fprintf(&imports, "\t%s %q\n", alias, m.Path)
		fmt.Fprintf(&rels, "releases: %q: {#module: %s, values: %s.debugValues}\n", name, alias, alias)
	}
	return writeDir(t, map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: {\n" + deps.String() + "}\n",
		"deploy.cue": "package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n" + imports.String() + ")\n\n" +
			"environments: [Name=string]: core.#Environment & {metadata: name: Name}\n" +
			fmt.Sprintf("environments: test: {namespace: %q, namespaces: {clusterScoped: true, allowed: [\"*\"]}, platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0-alpha.4\"}\n", ns) +
			"releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" + rels.String(),
	})
}

// A deployment's release of an upstream v2 module renders the objects
// upstream's CLI renders for it, leaf for leaf, apart from what the seeds
// require and docs/opm-modules.md lists: the release's identity and
// environment labels, and opm as the manager. web_app, jellystat and gotify
// against shared/opm-v2/expected; every module upstream's CLI renders
// (@78b9110 on library @a9611e3, `opm module build DIR -n default --name
// NAME` with its debugValues, recorded in testdata/opmv2-upstream-renders)
// against that render. The six modules upstream's loader refuses (their
// metadata.version is only a default) render here.
func TestV2ReleasesRenderWhatUpstreamRenders(t *testing.T) {
	opmv2test.Registry(t)
	recorded := untar(t, filepath.Join("testdata", "opmv2-upstream-renders.tar.gz"))
	expected := map[string]string{}
	for _, m := range []string{"web_app", "jellystat", "gotify"} {
		b, err := os.ReadFile(filepath.Join(opmv2test.Dir(t), "expected", m+".yaml"))
		assert.NilError(t, err)
		expected[m] = string(b)
	}
	refusedUpstream := 0
	for _, m := range opmv2test.Modules(t) {
		t.Run(m.Dir, func(t *testing.T) {
			release := strings.ReplaceAll(m.Dir, "_", "-")
			dir := v2Deployment(t, "default", map[string]string{release: m.Dir})
			rel := renderOne(t, dir, "test")
			upstream, ok := expected[m.Dir]
			if !ok {
				upstream, ok = recorded[m.Dir+".yaml"]
			}
			if !ok {
				refusedUpstream++
				assert.Assert(t, len(rel.Resources) > 0)
				return
			}
			var got []map[string]any
			for _, r := range rel.Resources {
				b, err := json.Marshal(r.Object.Object)
				assert.NilError(t, err)
				var o map[string]any
				assert.NilError(t, json.Unmarshal(b, &o))
				got = append(got, o)
			}
			want := map[string]map[string]any{}
			for _, doc := range strings.Split(upstream, "\n---\n") {
				var o map[string]any
				assert.NilError(t, yaml.Unmarshal([]byte(doc), &o))
				if o == nil {
					continue
				}
				seedsDifferences(o, rel)
				md := o["metadata"].(map[string]any)
				want[fmt.Sprintf("%s/%s/%s", o["kind"], md["namespace"], md["name"])] = o
			}
			assert.Assert(t, len(want) > 0)
			assert.Equal(t, len(got), len(want))
			for _, o := range got {
				md := o["metadata"].(map[string]any)
				k := fmt.Sprintf("%s/%s/%s", o["kind"], md["namespace"], md["name"])
				assert.DeepEqual(t, o, want[k])
			}
		})
	}
	assert.Equal(t, refusedUpstream, 6)
}

func untar(t *testing.T, archive string) map[string]string {
	t.Helper()
	f, err := os.Open(archive)
	assert.NilError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	assert.NilError(t, err)
	out := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		assert.NilError(t, err)
		b, err := io.ReadAll(tr)
		assert.NilError(t, err)
		if h.Typeflag == tar.TypeReg {
			out[filepath.Base(h.Name)] = string(b)
		}
	}
}

// seedsDifferences applies to upstream's object what opm renders
// differently on purpose (docs/opm-modules.md): app.kubernetes.io/managed-by
// names opm, whose prune and ownership checks read it, and the release's
// identity and environment labels join the instance's.
func seedsDifferences(o map[string]any, rel *render.Release) {
	md := o["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		return
	}
	labels["app.kubernetes.io/managed-by"] = "open-platform-model"
	labels["module-release.opmodel.dev/name"] = rel.Name
	labels["module-release.opmodel.dev/uuid"] = rel.ReleaseID
	labels["module-release.opmodel.dev/version"] = rel.Module.Version
	labels["module-release.opmodel.dev/environment"] = rel.Environment
	labels["environment.opmodel.dev/name"] = rel.Environment
}

// A SOPS-encrypted values file fills a v2 module's secret field
// (metallb's memberlist key, over its debugValues): the value reaches the
// Secret upstream's transformer writes, the render
// knows it as a secret and which field it reached, and the values it shows
// hold no trace of it.
func TestV2SecretsFromSops(t *testing.T) {
	opmv2test.Registry(t)
	key, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	const canary = "canary-9b1f5e-pass"
	enc, err := encryptedtest.Encrypt([]byte("speaker:\n  memberlistKey:\n    value: "+canary+"\n"), false, key.Recipient)
	assert.NilError(t, err)
	dir := v2Deployment(t, "default", map[string]string{"metallb": "metallb"})
	b, err := os.ReadFile(filepath.Join(dir, "deploy.cue"))
	assert.NilError(t, err)
	src := strings.Replace(string(b), `platform: registry:`, `valuesFiles: ["secrets/prod.sops.yaml"], platform: registry:`, 1)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(src), 0o644))
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "secrets"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "secrets", "prod.sops.yaml"), enc, 0o644))

	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: "test", Keys: encrypted.Keys{AgeIdentities: []string{key.Identity}}})
	assert.NilError(t, err)
	rel := rels[0]
	assert.Assert(t, slices.Contains(rel.Secrets, canary), "the render does not know the value as a secret")
	reached := false
	for i, r := range rel.Resources {
		y, err := yaml.Marshal(r.Object.Object)
		assert.NilError(t, err)
		if r.Object.GetKind() == "Secret" && strings.Contains(string(y), base64.StdEncoding.EncodeToString([]byte(canary))) || strings.Contains(string(y), canary) {
			assert.Assert(t, i < len(rel.SecretFields) && len(rel.SecretFields[i]) > 0, "%s holds the secret, but no field of it is traced", r.ID())
			reached = true
		}
	}
	if !reached {
		for _, r := range rel.Resources {
			y, _ := yaml.Marshal(r.Object.Object)
			t.Logf("%s", y)
		}
	}
	assert.Assert(t, reached, "the secret reaches no object")
	assert.Assert(t, !strings.Contains(rel.ValuesText, canary), "the shown values hold the secret: %s", rel.ValuesText)
}
