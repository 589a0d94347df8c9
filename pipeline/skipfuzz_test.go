package pipeline_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// fuzzRegistry publishes the registry module generated deployments may
// import, in two versions (an edit may bump the pin), and an OPM v2 core
// with its catalog in two versions (an edit may bump the platform's
// subscription or the module's pin): 2.1.0's ConfigMaps carry an
// annotation 2.0.0's do not.
func fuzzRegistry(tb testing.TB) {
	mod := func(version, value string) deploytest.Module {
		return deploytest.Module{Path: "example.com/fz@v0", Version: version, Files: map[string]string{
			"fz.cue": "package fz\n\nvalue: \"" + value + "\"\n#Env: {valuesFiles: [\"registry.yaml\"], ...}\n",
		}}
	}
	catalog21 := deploytest.Module{Path: deploytest.V2Catalog.Path, Version: "v2.1.0", Files: maps.Clone(deploytest.V2Catalog.Files)}
	const configMapMeta = `metadata: {"name": "\(m.name)-\(name)", namespace: m.namespace, labels: m.labels}`
	if !strings.Contains(catalog21.Files["catalog.cue"], configMapMeta) {
		tb.Fatal("deploytest.V2Catalog's configs transformer changed: update the fuzzer's catalog 2.1.0")
	}
	catalog21.Files["catalog.cue"] = strings.Replace(catalog21.Files["catalog.cue"], configMapMeta,
		`metadata: {"name": "\(m.name)-\(name)", namespace: m.namespace, labels: m.labels, annotations: "catalog.example.test/version": "2.1.0"}`, 1)
	deploytest.Registry(tb, mod("v0.1.0", "r1"), mod("v0.2.0", "r2"), deploytest.V2Core, deploytest.V2Catalog, catalog21)
}

// genDeployment writes, under root, a deployment directory deploy/ made
// by r from the constructs fingerprints must follow: module packages
// importing helper chains (one or two levels), a package vendored in
// cue.mod/pkg, a registry module, files embedded with @embed (a file, or a
// glob over CUE files), standard-library imports, lets, a hidden helper
// under environments, environments taken from another package or a
// registry definition, values files inside and outside the directory, in
// YAML or CUE, and one reached through a directory symlink.
// Every value that reaches a render is a distinct token tkNN, so an edit
// of one token changes exactly what reads it.
func genDeployment(r *rand.Rand, into string) (dir string, files map[string]string) {
	files = map[string]string{}
	tok := 0
	next := func() string { tok++; return fmt.Sprintf("tk%02d", tok) }
	useRegistry := r.IntN(3) == 0
	// One deployment in three also releases an OPM v2 module, on a
	// platform every environment subscribes to.
	useV2 := r.IntN(3) == 0
	deps := ""
	if useRegistry {
		deps += "deps: \"example.com/fz@v0\": v: \"v0.1.0\"\n"
	}
	if useV2 {
		deps += "deps: \"opmodel.dev/core@v2\": v: \"v2.0.0\"\ndeps: \"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0\"\n"
	}
	files["deploy/cue.mod/module.cue"] = "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n" + deps

	nMods := 1 + r.IntN(3)
	var imports []string
	for m := range nMods {
		name := fmt.Sprintf("m%d", m)
		var mi []string
		data := []string{"stamp: #config.stamp"}
		if r.IntN(2) == 0 { // a helper package, maybe importing another
			h := fmt.Sprintf("h%d", m)
			val := `"` + next() + `"`
			if r.IntN(2) == 0 {
				g := fmt.Sprintf("g%d", m)
				files["deploy/lib/"+g+"/"+g+".cue"] = fmt.Sprintf("package %s\n\nvalue: %q\n", g, next())
				files["deploy/lib/"+h+"/"+h+".cue"] = fmt.Sprintf("package %s\n\nimport \"test.example/deploy/lib/%s\"\n\nvalue: %s + %s.value\n", h, g, val, g)
			} else {
				files["deploy/lib/"+h+"/"+h+".cue"] = fmt.Sprintf("package %s\n\nvalue: %s\n", h, val)
			}
			mi = append(mi, `"test.example/deploy/lib/`+h+`"`)
			data = append(data, "helper: "+h+".value")
		}
		if useRegistry && r.IntN(2) == 0 {
			mi = append(mi, `"example.com/fz@v0"`)
			data = append(data, "registry: fz.value")
		}
		if r.IntN(4) == 0 { // a package vendored in cue.mod/pkg
			files["deploy/cue.mod/pkg/example.com/vend/vend.cue"] = fmt.Sprintf("package vend\n\nvalue: %q\n", next())
			mi = append(mi, `"example.com/vend"`)
			data = append(data, "vendored: vend.value")
		}
		if r.IntN(3) == 0 {
			mi = append(mi, `"strings"`)
			data = append(data, fmt.Sprintf("upper: strings.ToUpper(%q)", next()))
		}
		head, embed := "", ""
		switch r.IntN(4) {
		case 0:
			head, embed = "@extern(embed)\n\n", "_embedded: _ @embed(file=\"data.json\")\n"
			files["deploy/mods/"+name+"/data.json"] = fmt.Sprintf(`{"v": %q}`, next())
			data = append(data, "embedded: _embedded.v")
		case 1: // a glob that matches CUE files, read as text
			head, embed = "@extern(embed)\n\n", "_texts: _ @embed(glob=\"data/*.cue\", type=text)\n"
			files["deploy/mods/"+name+"/data/text.cue"] = fmt.Sprintf("// %s\n", next())
			data = append(data, `texts: strings.Join([for _, t in _texts {t}], "|")`)
			if !slices.Contains(mi, `"strings"`) {
				mi = append(mi, `"strings"`)
			}
		}
		body := fmt.Sprintf(`%spackage %s

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	%s
)

core.#Module
metadata: {apiVersion: "test.example/deploy/%s@v0", name: %q, version: "1.0.0"}
#config: stamp: *%q | string
`, head, name, strings.Join(mi, "\n\t"), name, name, next())
		body += embed
		body += fmt.Sprintf("#components: c%d: {\n\tcore.#Configs\n\tspec: configs: \"c%d\": data: {\n\t\t%s\n\t}\n}\n", m, m, strings.Join(data, "\n\t\t"))
		files["deploy/mods/"+name+"/"+name+".cue"] = body
		imports = append(imports, fmt.Sprintf("%smod \"test.example/deploy/mods/%s\"", name, name))
	}

	v2Release := ""
	if useV2 { // its config from a token and a helper package of its own
		files["deploy/lib/v2h/v2h.cue"] = fmt.Sprintf("package v2h\n\nvalue: %q\n", next())
		files["deploy/mods/v2/v2.cue"] = fmt.Sprintf(`package v2

import (
	c "opmodel.dev/core@v2"
	cat "opmodel.dev/catalogs/opm@v2"
	"test.example/deploy/lib/v2h"
)

c.#Module
metadata: {name: "v2", modulePath: "test.example/deploy/mods/v2@v0", version: "1.0.0"}
#config: stamp: *%q | string
debugValues: {}
#components: settings: {
	c.#Component
	#resources: (cat.#ConfigsFQN): cat.#Configs
	spec: configs: data: {stamp: #config.stamp, helper: v2h.value}
}
`, next())
		imports = append(imports, `v2mod "test.example/deploy/mods/v2"`)
		v2Release = fmt.Sprintf("releases: r%d: {#module: v2mod}\n", nMods)
	}

	// Environments: each takes its values one way or another.
	var envs []string
	var extra []string
	hidden, links := false, false
	for e := range 1 + r.IntN(2) {
		name := fmt.Sprintf("e%d", e)
		valuesFile := "values-" + name + ".yaml"
		switch r.IntN(8) {
		case 0: // no values file
			envs = append(envs, fmt.Sprintf("%s: namespace: %q", name, name))
		case 1: // a literal values file
			files["deploy/"+valuesFile] = "stamp: " + next() + "\n"
			envs = append(envs, fmt.Sprintf("%s: {namespace: %q, valuesFiles: [%q]}", name, name, valuesFile))
		case 2: // a hidden helper's values file
			files["deploy/common.yaml"] = "stamp: " + next() + "\n"
			hidden = true
			envs = append(envs, fmt.Sprintf("%s: _common & {namespace: %q}", name, name))
		case 3: // a values file outside the deployment directory
			files["shared/"+valuesFile] = "stamp: " + next() + "\n"
			envs = append(envs, fmt.Sprintf("%s: {namespace: %q, valuesFiles: [\"../shared/%s\"]}", name, name, valuesFile))
		case 4: // declared two packages away
			files["deploy/"+valuesFile] = "stamp: " + next() + "\n"
			files["deploy/envbase/base.cue"] = "package envbase\n\n#Base: {valuesFiles: [...string], ...}\n"
			files["deploy/envdefs/"+name+".cue"] = fmt.Sprintf("package envdefs\n\nimport \"test.example/deploy/envbase\"\n\n%s: envbase.#Base & {namespace: %q, valuesFiles: [%q]}\n", name, name, valuesFile)
			if !slices.Contains(extra, `"test.example/deploy/envdefs"`) {
				extra = append(extra, `"test.example/deploy/envdefs"`)
			}
			envs = append(envs, fmt.Sprintf("%s: envdefs.%s", name, name))
		case 6: // a values file in CUE
			files["deploy/values/"+name+".cue"] = fmt.Sprintf("stamp: %q\n", next())
			envs = append(envs, fmt.Sprintf("%s: {namespace: %q, valuesFiles: [\"values/%s.cue\"]}", name, name, name))
		case 7: // outside the directory, through a directory symlink
			files["shared/"+valuesFile] = "stamp: " + next() + "\n"
			links = true
			envs = append(envs, fmt.Sprintf("%s: {namespace: %q, valuesFiles: [\"../shared-link/%s\"]}", name, name, valuesFile))
		case 5: // a registry module's definition, else a computed path
			if useRegistry {
				files["deploy/registry.yaml"] = "stamp: " + next() + "\n"
				if !slices.Contains(extra, `fzenv "example.com/fz@v0"`) {
					extra = append(extra, `fzenv "example.com/fz@v0"`)
				}
				envs = append(envs, fmt.Sprintf("%s: fzenv.#Env & {namespace: %q}", name, name))
			} else {
				files["deploy/"+valuesFile] = "stamp: " + next() + "\n"
				envs = append(envs, fmt.Sprintf("%s: {namespace: %q, valuesFiles: [\"values-\" + %q + \".yaml\"]}", name, name, name))
			}
		}
	}
	if hidden {
		envs = append([]string{`_common: valuesFiles: ["common.yaml"]`}, envs...)
	}
	useLet := r.IntN(2) == 0
	var root strings.Builder
	root.WriteString("package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n")
	if useLet {
		root.WriteString("\t\"strings\"\n")
	}
	for _, i := range append(imports, extra...) {
		root.WriteString("\t" + i + "\n")
	}
	root.WriteString(")\n\nenvironments: [Name=string]: core.#Environment & {metadata: name: Name}\nreleases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n\n")
	if useLet {
		fmt.Fprintf(&root, "let owner = strings.ToLower(%q)\n", strings.ToUpper(next()))
	}
	root.WriteString("environments: {\n\t" + strings.Join(envs, "\n\t") + "\n}\n")
	if useV2 {
		root.WriteString("environments: [_]: platform: registry: \"opmodel.dev/catalogs/opm@v2\": version: \"2.0.0\"\n")
	}
	for m := range nMods {
		values := ""
		if useLet && m == 0 {
			values = ", values: stamp: owner"
		}
		fmt.Fprintf(&root, "releases: r%d: {#module: m%dmod%s}\n", m, m, values)
	}
	root.WriteString(v2Release)
	files["deploy/deploy.cue"] = root.String()
	files["deploy/README.md"] = "read by nobody " + next() + "\n"
	for name, content := range files {
		p := filepath.Join(into, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			panic(err)
		}
	}
	if links {
		// Not in files: an edit goes to what the link points at.
		if err := os.Symlink("shared", filepath.Join(into, "shared-link")); err != nil {
			panic(err)
		}
	}
	return filepath.Join(into, "deploy"), files
}

// fuzzEdit applies one edit, chosen by pick and kind, to one generated
// file: a token changed, a comment added, a file added to a package, the
// registry pin moved. It says what it did.
func fuzzEdit(root string, files map[string]string, pick, kind uint8) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	name := names[int(pick)%len(names)]
	p := filepath.Join(root, filepath.FromSlash(name))
	b, _ := os.ReadFile(p)
	s := string(b)
	write := func(p, s string) { _ = os.MkdirAll(filepath.Dir(p), 0o755); _ = os.WriteFile(p, []byte(s), 0o644) }
	switch kind % 4 {
	case 0: // a token changed, in a file that has one
		var withTokens []string
		for _, n := range names {
			if tokenRE.MatchString(files[n]) {
				withTokens = append(withTokens, n)
			}
		}
		name = withTokens[int(pick)%len(withTokens)]
		p = filepath.Join(root, filepath.FromSlash(name))
		b, _ := os.ReadFile(p)
		loc := tokenRE.FindIndex(b)
		if loc == nil { // an earlier edit took its only token
			write(p, string(b)+commentFor(name))
			return "comment in " + name
		}
		write(p, string(b[:loc[0]])+"tkXX"+string(b[loc[1]:]))
		return "token in " + name
	case 1: // a comment
		if strings.HasSuffix(name, ".cue") || strings.HasSuffix(name, ".yaml") {
			write(p, s+commentFor(name))
			return "comment in " + name
		}
		write(p, s+" ")
		return "space in " + name
	case 2: // a new file in the package of a generated CUE file
		if strings.HasSuffix(name, ".cue") && !strings.Contains(name, "cue.mod") {
			pkg := strings.TrimSuffix(filepath.Base(name), ".cue")
			if name == "deploy/deploy.cue" {
				pkg = "deploy"
			} else if strings.Contains(name, "envdefs/") {
				pkg = "envdefs"
			}
			write(filepath.Join(filepath.Dir(p), "added.cue"), "package "+pkg+"\n\n_added: \"new\"\n")
			return "a file added beside " + name
		}
		write(p, s+"\n")
		return "newline in " + name
	default: // a registry pin, the platform's catalog version
		mod := filepath.Join(root, "deploy", "cue.mod", "module.cue")
		mb, _ := os.ReadFile(mod)
		if strings.Contains(string(mb), "v0.1.0") {
			write(mod, strings.Replace(string(mb), "v0.1.0", "v0.2.0", 1))
			return "registry pin"
		}
		deploy := filepath.Join(root, "deploy", "deploy.cue")
		db, _ := os.ReadFile(deploy)
		if strings.Contains(string(db), `version: "2.0.0"`) {
			write(deploy, strings.Replace(string(db), `version: "2.0.0"`, `version: "2.1.0"`, 1))
			return "the platform's catalog version"
		}
		if pin := `"opmodel.dev/catalogs/opm@v2": v: "v2.0.0"`; strings.Contains(string(mb), pin) {
			write(mod, strings.Replace(string(mb), pin, `"opmodel.dev/catalogs/opm@v2": v: "v2.1.0"`, 1))
			return "the v2 catalog's module pin"
		}
		write(p, s+"\n")
		return "newline in " + name
	}
}

var tokenRE = regexp.MustCompile(`tk[0-9][0-9]`)

func commentFor(name string) string {
	if strings.HasSuffix(name, ".cue") {
		return "\n// an edit\n"
	}
	return "\n# an edit\n"
}

// FuzzSkipsAreSound generates a deployment, copies it, edits one file of
// the copy, and checks the promise every skip rests on: wherever the two
// sides' fingerprints are equal, their renders are byte-identical
// (objects, digests, change IDs, identities as cached); and the fast review, from a cold or a
// warm render cache or as merged shards (dealt by count or split by the
// plan), or after a second edit from the cache the first left, in
// chunks, equals the review that renders every pair (--no-skip). The seed corpus runs in make test;
// `go test ./pipeline -run '^$' -fuzz FuzzSkipsAreSound -fuzztime 30m -timeout 0` explores further
// (a fuzzing worker is bound by go test's -timeout, 10 minutes by default).
func FuzzSkipsAreSound(f *testing.F) {
	fuzzRegistry(f)
	for seed := range uint64(12) {
		f.Add(seed, uint8(seed*7), uint8(seed))
	}
	f.Fuzz(func(t *testing.T, seed uint64, pick, kind uint8) {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		baseRoot, headRoot := t.TempDir(), t.TempDir()
		base, files := genDeployment(r, baseRoot)
		head, _ := genDeployment(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), headRoot)
		what := fuzzEdit(headRoot, files, pick, kind)

		type pair struct{ release, env string }
		var pairs []pair
		envs := fuzzEnvironments(t, base)
		for m := range strings.Count(files["deploy/deploy.cue"], "releases: r") {
			for _, e := range envs {
				pairs = append(pairs, pair{fmt.Sprintf("r%d", m), e})
			}
		}
		fingerprinted := 0
		for _, p := range pairs {
			// Generated deployments are valid: a render that fails on both
			// sides would compare equal and prove nothing.
			if rb := fuzzRender(t, base, p.release, p.env); strings.HasPrefix(rb, "error: ") {
				t.Fatalf("seed %d: the generated %s does not render in %s: %s", seed, p.release, p.env, rb)
			}
			fb, errB := fuzzFingerprint(t, base, p.release, p.env)
			fh, errH := fuzzFingerprint(t, head, p.release, p.env)
			if errB != nil || errH != nil {
				t.Logf("%s in %s: no fingerprint: %v %v", p.release, p.env, errB, errH)
				continue // no fingerprint: never skipped
			}
			fingerprinted++
			if fb != fh {
				continue
			}
			rb, rh := fuzzRender(t, base, p.release, p.env), fuzzRender(t, head, p.release, p.env)
			assert.Equal(t, rh, rb, "seed %d, edit %s: %s in %s has equal fingerprints on both sides but renders differently", seed, what, p.release, p.env)
		}
		t.Logf("seed %d, edit %s: %d of %d pairs fingerprinted", seed, what, fingerprinted, len(pairs))

		// The fast review with an empty render cache (it fills it), again
		// with the cache warm (every rendered pair read back), and the
		// review that renders every pair and reads no cache agree.
		t.Setenv("OPM_CACHE_DIR", t.TempDir())
		fast, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base})
		assert.NilError(t, err, "seed %d, edit %s", seed, what)
		warm, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base})
		assert.NilError(t, err, "seed %d, edit %s", seed, what)
		full, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base, NoSkip: true})
		assert.NilError(t, err, "seed %d, edit %s", seed, what)
		assert.Equal(t, outcome(t, fast), outcome(t, full), "seed %d, edit %s: the fast review differs from --no-skip", seed, what)
		assert.Equal(t, outcome(t, warm), outcome(t, full), "seed %d, edit %s: the review from the render cache differs from --no-skip", seed, what)
		fj, _ := json.Marshal(fast)
		wj, _ := json.Marshal(warm)
		assert.Equal(t, string(wj), string(fj), "seed %d, edit %s: the warm review is not the cold one, byte for byte", seed, what)

		// Sharded, dealt by count and split by the plan, the merged
		// shards are the review.
		opts := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base, NoCache: true}
		plan, err := pipeline.PlanReview(t.Context(), opts)
		assert.NilError(t, err, "seed %d, edit %s", seed, what)
		for _, split := range []*pipeline.ReviewSplit{nil, plan.SplitInto(3)} {
			n := 2
			if split != nil {
				n = split.Shards
			}
			var parts []*pipeline.PartialReview
			for i := 1; i <= n; i++ {
				o := opts
				o.Shard, o.Split = &pipeline.Shard{Index: i, Count: n}, split
				p, err := pipeline.ReviewPart(t.Context(), o)
				assert.NilError(t, err, "seed %d, edit %s, shard %d/%d", seed, what, i, n)
				parts = append(parts, p)
			}
			merged, err := pipeline.MergeReviews(parts)
			assert.NilError(t, err, "seed %d, edit %s", seed, what)
			assert.Equal(t, outcome(t, merged), outcome(t, full), "seed %d, edit %s: %d shards (split %v) merged differ from --no-skip", seed, what, n, split != nil)
		}

		// The pull request moves on: another edit of the head, reviewed
		// with the cache the reviews above filled (some pairs found on
		// both sides, some on one, some on neither) one release per
		// chunk, is the review that renders every pair.
		what += ", then " + fuzzEdit(headRoot, files, pick/2+1, kind/4+1)
		chunked := pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base}
		moved, err := pipeline.ReviewInChunks(t.Context(), chunked, 1)
		assert.NilError(t, err, "seed %d, edit %s", seed, what)
		full, err = pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base, NoSkip: true})
		assert.NilError(t, err, "seed %d, edit %s", seed, what)
		assert.Equal(t, outcome(t, moved), outcome(t, full), "seed %d, edit %s: the review in chunks from a partly warm cache differs from --no-skip", seed, what)

		// The same change as a pull request: the base read from git's
		// objects (the CUE files in memory) or, one seed in four, a first
		// pull request whose base has no deployment at all.
		repo := t.TempDir()
		firstPR := seed%4 == 3
		if firstPR {
			assert.NilError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("a new service\n"), 0o644))
		} else {
			genDeployment(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), repo)
		}
		gitRun(t, repo, "init", "-q", "-b", "main")
		gitRun(t, repo, "add", "-A")
		gitRun(t, repo, "commit", "-q", "-m", "base")
		gitRun(t, repo, "checkout", "-q", "-b", "feature")
		if firstPR {
			genDeployment(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), repo)
		}
		pr := fuzzEdit(repo, files, pick, kind)
		gitRun(t, repo, "add", "-A")
		gitRun(t, repo, "commit", "-q", "-m", "change")
		inRepo := filepath.Join(repo, "deploy")
		t.Setenv("OPM_CACHE_DIR", t.TempDir())
		fast, err = pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: inRepo}, BaseRefs: []string{"main"}})
		assert.NilError(t, err, "seed %d, pull request %s (first: %v)", seed, pr, firstPR)
		full, err = pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: inRepo}, BaseRefs: []string{"main"}, NoSkip: true})
		assert.NilError(t, err, "seed %d, pull request %s (first: %v)", seed, pr, firstPR)
		assert.Equal(t, outcome(t, fast), outcome(t, full), "seed %d, pull request %s (first: %v): the fast review of the base in git differs from --no-skip", seed, pr, firstPR)
		if firstPR {
			for _, rc := range full.Releases {
				assert.Check(t, rc.Error == "" && rc.Base == nil, "seed %d: a first pull request reviews %s/%s as added: %+v", seed, rc.Name, rc.Environment, rc)
			}
		}
	})
}

// fuzzEnvironments are the environments dir declares, as a render sees them.
func fuzzEnvironments(t *testing.T, dir string) []string {
	t.Helper()
	envs, err := pipeline.DeclaredEnvironments(t.Context(), dir)
	assert.NilError(t, err, "the generated deployment must load")
	return envs
}

func fuzzFingerprint(t *testing.T, dir, release, env string) (string, error) {
	t.Helper()
	p, err := load.ParseImports(t.Context(), dir, nil)
	if err != nil {
		return "", err
	}
	tree, err := fingerprint.Scan(t.Context(), p)
	if err != nil {
		return "", err
	}
	return tree.Of(t.Context(), release, fingerprint.Inputs{Environment: env})
}

// fuzzRender is one release's render as text: digest, change ID and every
// object's JSON, or the error (a render that fails the same way on both
// sides is the same result).
func fuzzRender(t *testing.T, dir, release, env string) string {
	t.Helper()
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, Environment: env, Releases: []string{release}})
	if err != nil {
		return "error: " + strings.ReplaceAll(err.Error(), filepath.Dir(dir), "ROOT")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", rels[0].ManifestDigest, rels[0].ChangeID)
	// The identity as the identity cache keeps it by fingerprint (apply's
	// fast path and status read it instead of rendering): the cluster and
	// the reach are in no object, so they are compared here.
	r := rels[0]
	id, err := json.Marshal([]any{r.Key, r.Name, r.Namespace, r.Environment, r.ReleaseID, r.Module, r.Cluster, r.Reach})
	assert.NilError(t, err)
	b.Write(append(id, '\n'))
	for _, res := range rels[0].Resources {
		j, err := json.Marshal(res.Object.Object)
		assert.NilError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
