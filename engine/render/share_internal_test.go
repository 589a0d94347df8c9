package render

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// renderTwice renders opts on one goroutine and again with the components
// shared out four ways (one component a share at least), and fails the
// test on any difference between the two: every object's YAML and JSON
// bytes and component, digest, change ID, identity, values (JSON and
// text), warnings, secrets and secret fields, reach — or, for a render
// that fails, the error's text. Then it renders shared three times more
// with a sealed component cache — storing, reading, reading and verifying
// against a build — each compared the same way. It returns what the
// shared render counted and what the second cached one did. A fourth
// renders from a load the identities' evaluation made (not cut), as a diff
// does, and must read the same entries.
func renderTwice(t *testing.T, opts Options) (stats, warm *transformStats) {
	t.Helper()
	ctx := context.Background()
	one := opts
	one.Parallelism = 1
	want, wantErr := Render(ctx, one)
	shared := opts
	shared.Parallelism, shared.shareLeast, shared.stats = 4, 1, &transformStats{}
	got, err := Render(ctx, shared)
	if wantErr != nil {
		assert.Assert(t, err != nil, "the render without sharing fails (%v), the shared one does not", wantErr)
		assert.Equal(t, err.Error(), wantErr.Error())
		return shared.stats, nil
	}
	assert.NilError(t, err)
	assert.Equal(t, len(got), len(want))
	for i := range want {
		sameRelease(t, got[i], want[i])
	}
	// The component cache, sealed: stored on the first render, read on
	// the second, read and verified against a build on the third, read
	// from the identities' load on the fourth — each what one goroutine
	// renders.
	cached := shared
	cached.Cache = cache.Open(t.TempDir(), 0, nil).WithSealKey([]byte("a seal key of the test, 32 bytes"))
	for run, verify := range []bool{false, false, true, false} {
		cached.VerifyCache, cached.stats, cached.Loads = verify, &transformStats{}, nil
		if run == 3 {
			// As a diff renders after evaluating the identities: from the
			// command's load, whose components were evaluated (not cut).
			cached.Loads = load.NewMemo()
			identity := cached
			identity.IdentityOnly = true
			_, err := Render(ctx, identity)
			assert.NilError(t, err)
		}
		got, err := Render(ctx, cached)
		assert.NilError(t, err)
		assert.Equal(t, len(got), len(want))
		for i := range want {
			sameRelease(t, got[i], want[i])
		}
		switch run {
		case 1:
			warm = cached.stats
		case 3:
			assert.Equal(t, cached.stats.cut.Load(), int64(0), "the held load was cut")
			if warm.built.Load() == 0 && warm.cut.Load() == 1 {
				assert.Equal(t, cached.stats.shared.Load(), int64(1), "from the command's load, not shared")
				assert.Equal(t, cached.stats.built.Load(), int64(0), "from the command's load, a component was built again with nothing moved")
			}
		}
	}
	return shared.stats, warm
}

func sameRelease(t *testing.T, got, want *Release) {
	t.Helper()
	assert.Equal(t, got.Key, want.Key)
	assert.Equal(t, got.ReleaseID, want.ReleaseID)
	assert.Equal(t, got.ManifestDigest, want.ManifestDigest)
	assert.Equal(t, got.ChangeID, want.ChangeID)
	assert.Equal(t, string(got.Values), string(want.Values))
	assert.Equal(t, got.ValuesText, want.ValuesText)
	assert.Check(t, is.DeepEqual(got.Warnings, want.Warnings))
	assert.Check(t, is.DeepEqual(got.Secrets, want.Secrets))
	assert.Check(t, is.DeepEqual(got.SecretFields, want.SecretFields))
	assert.Check(t, is.DeepEqual(got.Reach, want.Reach))
	assert.Equal(t, len(got.Resources), len(want.Resources))
	for i := range want.Resources {
		g, w := got.Resources[i], want.Resources[i]
		assert.Equal(t, g.Component, w.Component)
		gy, err := manifest.YAML(g.Object.Object)
		assert.NilError(t, err)
		wy, err := manifest.YAML(w.Object.Object)
		assert.NilError(t, err)
		assert.Equal(t, string(gy), string(wy))
		gj, err := json.Marshal(g.Object.Object)
		assert.NilError(t, err)
		wj, err := json.Marshal(w.Object.Object)
		assert.NilError(t, err)
		assert.Equal(t, string(gj), string(wj))
	}
}

// Every example and fixture renders the same with its components shared
// out as on one goroutine, each release in each environment; the examples'
// modules are shared; the shop (a provider of its own), OPM's modules on
// their registry provider, OPM v2 modules and modules of one component are
// not.
func TestSharedRenderEqualsOneGoroutineOnFixtures(t *testing.T) {
	deploytest.Registry(t, append(deploytest.V2Modules(), deploytest.OPMModules()...)...)
	examples, err := filepath.Abs("../../examples")
	assert.NilError(t, err)
	cases := []struct {
		name, dir string
		shares    bool
	}{
		{"examples", examples, true},
		{"shop", filepath.Join(examples, "shop"), false},
		// One component each: nothing to share.
		{"app", deploytest.Dir(t, "ns", `image: "nginx:1.27"`), false},
		{"healthy", deploytest.HealthyDir(t, "releases: app: {#module: appmodule, metadata: namespace: \"ns\"}\n"), false},
		{"attack", deploytest.AttackDir(t, "prod", deploytest.AttackRepo, deploytest.AttackCanary, deploytest.AttackPIN), false},
		// OPM's core@v0 module on its registry provider: not the
		// embedded catalog's, so not shared.
		{"opm-v0", deploytest.Write(t, map[string]string{"cue.mod/module.cue": deploytest.OPMModuleFile, "deploy.cue": deploytest.OPMDeployment}), false},
		{"v2", deploytest.V2Deployment(t, "ns", `image: string | *"nginx:1.27"`, "web: cat.#Stateless & {spec: container: image: #config.image}\nsettings: {c.#Component, #resources: (cat.#ConfigsFQN): cat.#Configs, spec: configs: a: k: \"1\"}"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := load.Load(context.Background(), c.dir)
			assert.NilError(t, err)
			keys, err := load.FieldNames(d.Root.LookupPath(cue.ParsePath("releases")))
			assert.NilError(t, err)
			envs, err := load.FieldNames(d.Root.LookupPath(cue.ParsePath("environments")))
			assert.NilError(t, err)
			if len(envs) == 0 {
				envs = []string{""}
			}
			shared := int64(0)
			for _, key := range keys {
				for _, env := range envs {
					stats, _ := renderTwice(t, Options{Dir: c.dir, Environment: env, Releases: []string{key}})
					shared += stats.shared.Load()
				}
			}
			assert.Equal(t, shared > 0, c.shares, "releases shared out: %d", shared)
		})
	}
}

// A generated corpus: modules of a few components of every kind, values
// from the release, the environment and secret inputs, and the shapes that
// must not be shared (a component that ranges over #components, a module
// written `m & {…}`) or must fail (two components rendering one object, a
// component that conflicts with its values), and one its default values
// make invalid. Shared and one-goroutine renders agree on every byte and
// every error text; the shapes that can be shared are, from a load that
// left the module's components out where their names are written plainly.
func TestSharedRenderEqualsOneGoroutineOnGeneratedModules(t *testing.T) {
	n := 24
	if testing.Short() {
		n = 8
	}
	for seed := range n {
		g := generate(rand.New(rand.NewPCG(uint64(seed), 62)))
		t.Run(fmt.Sprintf("seed-%d-%s", seed, g.shape()), func(t *testing.T) {
			dir := deploytest.Write(t, g.files())
			stats, warm := renderTwice(t, g.options(dir))
			switch {
			case g.broken && !g.unshareable() && !g.dup && !g.bad:
				// Shared, then refused by the reference check, which reads
				// where the reference is written from the module filled in
				// on the caller's goroutine: the same message. The load
				// that left the components out cannot place it, and the
				// deployment as written renders again.
				assert.Equal(t, stats.shared.Load(), int64(1))
				assert.Equal(t, stats.uncut.Load(), int64(1))
			case g.fails():
				assert.Equal(t, stats.shared.Load(), int64(0))
			case g.cond && !g.env:
				// Named at the default values, the component is missing
				// from the names: every share fails, one goroutine renders.
				assert.Equal(t, stats.shared.Load(), int64(0))
				assert.Equal(t, stats.whole.Load(), int64(1))
			case g.unshareable() || g.comps < 2:
				assert.Equal(t, stats.shared.Load()+stats.whole.Load(), int64(0), "a module that cannot be cut was shared")
			default:
				assert.Equal(t, stats.shared.Load(), int64(1), "a module that can be cut was not shared")
				if !g.cond { // a comprehension in #components: named from the evaluation
					assert.Equal(t, stats.cut.Load(), int64(1), "the module's components were evaluated on the caller's goroutine")
					if !g.secret { // never a release with secret values
						assert.Equal(t, warm.built.Load(), int64(0), "a component was built again with nothing moved")
					}
				}
				// A secret input, or a value of the repository a Secret
				// holds, is traced with stand-ins, shared out too.
				traced := g.secret || slices.Contains(g.kinds, 2)
				assert.Equal(t, stats.standIns.Load() > 0, traced, "stand-in renders shared out: %d", stats.standIns.Load())
			}
		})
	}
}

// generated is one module of the corpus and the render of its release.
type generated struct {
	comps                  int
	kinds                  []int // per component: 0 workload, 1 configs, 2 secrets, 3 objects
	env, secret, namespace bool
	ranges, and, dup, bad  bool
	// cond: a component only the release's own values add (none at the
	// default values the components are named at).
	cond bool
	// broken: a Service whose targetPort names no container port (an
	// error that says where it is written); account: a workload's
	// ServiceAccount the release does not declare (a warning).
	broken, account bool
	// strict: a component its default values make invalid, which the
	// release's values make valid (only the values are ever rendered).
	strict bool
	// via: a Secret reading the token through a field of the module;
	// whole: a ConfigMap holding every value of #config.
	via, whole bool
}

func generate(r *rand.Rand) generated {
	g := generated{comps: 1 + r.IntN(9), env: r.IntN(2) == 0, secret: r.IntN(3) == 0, namespace: r.IntN(4) == 0}
	switch r.IntN(8) {
	case 0:
		g.ranges = true
	case 1:
		g.and = true
	case 2:
		g.dup = g.comps > 1
	case 3:
		g.bad = true
	case 4:
		g.cond = true
	case 5:
		g.broken = true
	case 6:
		g.account = true
	}
	for range g.comps {
		g.kinds = append(g.kinds, r.IntN(4))
	}
	g.strict = r.IntN(4) == 0
	g.via, g.whole = r.IntN(3) == 0, r.IntN(4) == 0
	return g
}

func (g generated) shape() string {
	var s []string
	for _, f := range []struct {
		on   bool
		name string
	}{{g.env, "env"}, {g.secret, "secret"}, {g.namespace, "namespace"}, {g.ranges, "ranges"}, {g.and, "and"}, {g.dup, "dup"}, {g.bad, "bad"}, {g.cond, "cond"}, {g.broken, "broken"}, {g.account, "account"}, {g.strict, "strict"}, {g.via, "via"}, {g.whole, "whole"}} {
		if f.on {
			s = append(s, f.name)
		}
	}
	return fmt.Sprintf("%d-%s", g.comps, strings.Join(s, "-"))
}

func (g generated) fails() bool       { return g.dup || g.bad || g.broken }
func (g generated) unshareable() bool { return g.ranges || g.and }

func (g generated) files() map[string]string {
	var comps strings.Builder
	for i, kind := range g.kinds {
		name := fmt.Sprintf("c%d", i)
		if i%3 == 2 {
			name = fmt.Sprintf("%q", fmt.Sprintf("comp-%d", i))
		}
		cm := fmt.Sprintf("cm-%d", i)
		if g.dup && i == g.comps-1 {
			cm = "cm-0"
			kind = 3
		}
		switch kind {
		case 0:
			fmt.Fprintf(&comps, `	%s: {
		core.#Workload
		core.#Service
		spec: {
			workload: {type: "stateless", replicas: #config.replicas, container: {image: #config.image, ports: http: containerPort: 8080}}
			service: ports: http: {port: 80, targetPort: 8080}
		}
	}
`, name)
		case 1:
			fmt.Fprintf(&comps, "\t%s: {\n\t\tcore.#Configs\n\t\tspec: configs: %q: data: {label: #config.label, n: \"%d\"}\n\t}\n", name, cm, i)
		case 2:
			fmt.Fprintf(&comps, "\t%s: {\n\t\tcore.#Secrets\n\t\tspec: secrets: \"s-%d\": data: token: \"t-\\(#config.token)\"\n\t}\n", name, i)
		case 3:
			fmt.Fprintf(&comps, "\t%s: {\n\t\tcore.#Objects\n\t\tspec: objects: [{apiVersion: \"v1\", kind: \"ConfigMap\", metadata: name: %q, data: {image: #config.image}}]\n\t}\n", name, cm)
		}
	}
	if g.ranges {
		comps.WriteString("\tlist: {\n\t\tcore.#Configs\n\t\tspec: configs: \"names\": data: names: strings.Join([for k, _ in #components {k}], \",\")\n\t}\n")
	}
	if g.broken || g.account {
		account, port := "", "http"
		if g.account {
			account = "\t\t\tworkload: serviceAccountName: \"made-elsewhere\"\n"
		}
		if g.broken {
			port = "nope"
		}
		fmt.Fprintf(&comps, `	refs: {
		core.#Workload
		core.#Service
		spec: {
			workload: {type: "stateless", container: {image: #config.image, ports: http: containerPort: 8080}}
%s			service: ports: web: {port: 80, targetPort: %q}
		}
	}
`, account, port)
	}
	if g.cond {
		comps.WriteString("\tif #config.label == \"from-release\" {\n\t\tonly: {\n\t\t\tcore.#Configs\n\t\t\tspec: configs: \"only-with-values\": data: k: \"v\"\n\t\t}\n\t}\n")
	}
	if g.via {
		comps.WriteString("\tvia: {\n\t\tcore.#Secrets\n\t\tspec: secrets: \"via\": data: token: _token\n\t}\n")
	}
	if g.whole {
		comps.WriteString("\twhole: {\n\t\tcore.#Configs\n\t\tspec: configs: \"whole\": data: {for k, v in #config {(k): \"\\(v)\"}}\n\t}\n")
	}
	if g.strict {
		comps.WriteString("\tstrict: {\n\t\tcore.#Configs\n\t\tspec: configs: \"strict\": data: n: #config.label & !=\"plain\"\n\t}\n")
	}
	if g.bad {
		comps.WriteString("\tbad: {\n\t\tcore.#Configs\n\t\tspec: configs: \"bad\": data: n: \"x\" & #config.label\n\t}\n")
	}
	module := `package gen

import (
	"strings"
	core "github.com/opmodel/pipeline/catalog@v0"
)

core.#Module

metadata: {apiVersion: "test.example/deploy/gen@v0", name: "gen", version: "0.1.0"}

#config: {
	image:    *"nginx:1.27" | string
	replicas: *1 | int
	label:    *"plain" | string
	token:    *"public" | string
}

#components: {
` + comps.String() + "}\n\n_strings: strings.ToUpper(\"\")\n_token: \"v-\\(#config.token)\"\n"
	ref := "genmodule"
	if g.and {
		ref = "genmodule & {#components: extra: {core.#Configs, spec: configs: \"from-release\": data: k: \"v\"}}"
	}
	deploy := `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	genmodule "test.example/deploy/gen"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: staging: {namespace: "staging", values: {label: "from-env", replicas: 2}}

releases: gen: {
	#module: ` + ref + `
	metadata: namespace: "ns"
	values: {image: "registry.example/gen:1", label: "from-release"}
}
`
	return map[string]string{"gen/gen.cue": module, "deploy.cue": deploy}
}

func (g generated) options(dir string) Options {
	opts := Options{Dir: dir, Releases: []string{"gen"}}
	if g.env {
		opts.Environment = "staging"
	}
	if g.secret {
		opts.Values = []values.Input{{Name: "values-secret", Data: []byte("token: s3cr3tT0ken\n"), Secret: true}}
	}
	if g.namespace {
		opts.Namespace = "moved"
	}
	return opts
}

// A release's #module can take conjuncts from the root package in more
// ways than `#module: m`; a goroutine that builds m alone would miss them,
// so each of these is rendered on one goroutine — and renders what one
// goroutine renders.
func TestSharedRenderLeavesModulesTheRootReachesInto(t *testing.T) {
	g := generated{comps: 4, kinds: []int{1, 1, 1, 1}}
	extra := `#components: c0: spec: configs: "from-root": data: k: "v"`
	cases := map[string]map[string]string{
		"and":       {"deploy.cue": strings.Replace(g.files()["deploy.cue"], "#module: genmodule", "#module: genmodule & {"+extra+"}", 1)},
		"pattern":   {"more.cue": "package deploy\n\nreleases: [string]: #module: " + extra + "\n"},
		"embedded":  {"more.cue": "package deploy\n\n_more: #module: " + extra + "\nreleases: gen: _more\n"},
		"top-level": {"more.cue": "package deploy\n\n{releases: gen: #module: " + extra + "}\n"},
		"second":    {"more.cue": "package deploy\n\nreleases: gen: #module: " + extra + "\n"},
		"computed":  {"more.cue": "package deploy\n\n_k: \"gen\"\nreleases: (_k): #module: " + extra + "\n"},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			all := g.files()
			for k, v := range files {
				all[k] = v
			}
			dir := deploytest.Write(t, all)
			stats, _ := renderTwice(t, g.options(dir))
			assert.Equal(t, stats.shared.Load()+stats.whole.Load(), int64(0), "shared out")
			rels, err := Render(context.Background(), Options{Dir: dir, Releases: []string{"gen"}})
			assert.NilError(t, err)
			found := false
			for _, r := range rels[0].Resources {
				found = found || r.Object.GetName() == "from-root"
			}
			assert.Assert(t, found, "the root's conjunct is not rendered: the case tests nothing")
		})
	}
	// And the plain module is shared (the cases above differ only there).
	stats, _ := renderTwice(t, g.options(deploytest.Write(t, g.files())))
	assert.Equal(t, stats.shared.Load(), int64(1))
}

// The caller's load leaves the module's components out only when nothing
// outside the module can read them: a release whose values count them,
// written in the root package or in a package it imports, renders what one
// goroutine renders, from the deployment as written.
func TestCutLoadLeavesModulesOthersRead(t *testing.T) {
	g := generated{comps: 4, kinds: []int{1, 1, 1, 1}}
	counted := `label: "n-\(len(genmodule.#components))"`
	cases := map[string]map[string]string{
		"root":    {"deploy.cue": strings.Replace(g.files()["deploy.cue"], `label: "from-release"`, counted, 1)},
		"release": {"deploy.cue": strings.Replace(g.files()["deploy.cue"], `label: "from-release"`, `label: "n-\(len(#module.#components))"`, 1)},
		"imported": {
			"count/count.cue": "package count\n\nimport genmodule \"test.example/deploy/gen\"\n\n" + counted + "\n",
			"deploy.cue": strings.Replace(strings.Replace(g.files()["deploy.cue"], `label: "from-release"`, `label: count.label`, 1),
				`genmodule "test.example/deploy/gen"`, "genmodule \"test.example/deploy/gen\"\n\tcount \"test.example/deploy/count\"", 1),
		},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			all := g.files()
			maps.Copy(all, files)
			dir := deploytest.Write(t, all)
			stats, _ := renderTwice(t, g.options(dir))
			assert.Equal(t, stats.cut.Load()+stats.uncut.Load(), int64(0), "cut")
			assert.Equal(t, stats.shared.Load(), int64(1), "not shared: the case tests nothing")
			rels, err := Render(context.Background(), Options{Dir: dir, Releases: []string{"gen"}})
			assert.NilError(t, err)
			assert.Check(t, is.Contains(string(rels[0].Values), `"n-4"`), "the values do not count the components: the case tests nothing")
		})
	}
}
