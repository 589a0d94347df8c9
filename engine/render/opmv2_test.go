package render_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"

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
			fmt.Sprintf("environments: test: {namespace: %q, platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0-alpha.4\"}\n", ns) +
			"releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" + rels.String(),
	})
}

// A deployment's release of an upstream v2 module renders the objects
// upstream's CLI renders for it (shared/opm-v2/expected), leaf for leaf,
// apart from what the seeds require and docs/opm-modules.md lists: the
// release's identity and environment labels, and opm as the manager.
func TestV2ReleasesRenderWhatUpstreamRenders(t *testing.T) {
	opmv2test.Registry(t)
	for release, module := range map[string]string{"web-app": "web_app", "jellystat": "jellystat", "gotify": "gotify"} {
		t.Run(module, func(t *testing.T) {
			dir := v2Deployment(t, "default", map[string]string{release: module})
			rel := renderOne(t, dir, "test")
			var got []map[string]any
			for _, r := range rel.Resources {
				b, err := json.Marshal(r.Object.Object)
				assert.NilError(t, err)
				var o map[string]any
				assert.NilError(t, json.Unmarshal(b, &o))
				got = append(got, o)
			}
			want := map[string]map[string]any{}
			b, err := os.ReadFile(filepath.Join(opmv2test.Dir(t), "expected", module+".yaml"))
			assert.NilError(t, err)
			for _, doc := range strings.Split(string(b), "\n---\n") {
				var o map[string]any
				assert.NilError(t, yaml.Unmarshal([]byte(doc), &o))
				if o == nil {
					continue
				}
				seedsDifferences(o, rel)
				md := o["metadata"].(map[string]any)
				id := fmt.Sprintf("%s/%s/%s", o["kind"], md["namespace"], md["name"])
				want[id] = o
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
