//go:build bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enginecache "github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
)

// monoReleases is the size of the generated platform monorepo.
const monoReleases, monoEnvs = 200, 3

// TestBenchMonorepo measures what a one-module change costs in a platform
// monorepo of 200 releases × 3 environments, against a repository holding
// only that release (the physical limit: evaluate only what the change
// can affect):
//   - review-mono: `opm review --base main` of a branch that changes one
//     module file used by one release;
//   - render-one: `opm render --release one` (the selection's other
//     releases are not evaluated);
//   - fingerprint vs render: computing one release's input fingerprint
//     (parsing only) against rendering it, in this process.
func TestBenchMonorepo(t *testing.T) {
	work := t.TempDir()
	opm := buildOpm(t, work)
	const one = "m007"
	var all []string
	for i := range monoReleases {
		all = append(all, fmt.Sprintf("m%03d", i))
	}
	mono := monoRepo(t, filepath.Join(work, "mono"), all, one)
	single := monoRepo(t, filepath.Join(work, "single"), []string{one}, one)

	review := func(dir string, want string) time.Duration {
		d, out, _ := measured(t, 0, opm, "review", dir, "--base", "main")
		if !strings.Contains(string(out), want) {
			t.Fatalf("opm review in %s did not report %q:\n%s", dir, want, out)
		}
		return d
	}
	monoReview, singleReview := medianPair(
		func() time.Duration {
			return review(mono, fmt.Sprintf("%d release/environment pair(s) unchanged", (monoReleases-1)*monoEnvs))
		},
		func() time.Duration { return review(single, "release "+one+" (env e0") },
	)
	ratio := monoReview.Seconds() / singleReview.Seconds()
	fmt.Printf("bench review-mono opm=%.2fs single=%.2fs ratio=%.2f (%d releases × %d environments, one module changed)%s\n",
		monoReview.Seconds(), singleReview.Seconds(), ratio, monoReleases, monoEnvs, verdict("review-mono", ratio))

	renderOne := func(dir string) time.Duration {
		return timed(t, opm, "render", dir, "--release", one, "--env", "e0")
	}
	monoRender, singleRender := medianPair(func() time.Duration { return renderOne(mono) }, func() time.Duration { return renderOne(single) })
	fmt.Printf("bench render-one-of-%d opm=%.2fs single=%.2fs ratio=%.2f\n", monoReleases, monoRender.Seconds(), singleRender.Seconds(), monoRender.Seconds()/singleRender.Seconds())

	for _, c := range []struct{ name, dir, release string }{
		{"small", single, one},
		{"1000-objects", peerDeployment(t, filepath.Join(work, "big"), "bench", 250, 0), "bench"},
	} {
		envCache := t.TempDir()
		fingerprintOnce := func(cache string) time.Duration {
			start := time.Now()
			p, err := load.ParseImports(t.Context(), c.dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := fingerprint.Scan(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			tree.UseCache(enginecache.Open(cache, 0, nil)) // "": none
			if _, err := tree.Of(t.Context(), c.release, fingerprint.Inputs{Environment: envFor(c.name)}); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		// Cold: the environments are evaluated every time; warm: their
		// evaluation is cached (what every run after the first gets).
		cold := median(func() time.Duration { return fingerprintOnce("") })
		fp := median(func() time.Duration { return fingerprintOnce(envCache) })
		rd := median(func() time.Duration {
			start := time.Now()
			if _, err := render.Render(t.Context(), render.Options{Dir: c.dir, Environment: envFor(c.name), Releases: []string{c.release}}); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		})
		fmt.Printf("bench fingerprint-%s fingerprint=%.3fs render=%.3fs ratio=%.3f cold=%.3fs cold-ratio=%.3f\n", c.name, fp.Seconds(), rd.Seconds(), fp.Seconds()/rd.Seconds(), cold.Seconds(), cold.Seconds()/rd.Seconds())
	}
}

func envFor(name string) string {
	if name == "small" {
		return "e0"
	}
	return ""
}

// monoRepo writes a git repository whose deployment directory declares
// releases (one module package each, two objects) in monoEnvs
// environments, commits it on main, and on branch feature changes the
// module of release changed.
func monoRepo(t *testing.T, dir string, releases []string, changed string) string {
	t.Helper()
	var deploy strings.Builder
	deploy.WriteString("package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n")
	for _, r := range releases {
		fmt.Fprintf(&deploy, "\t%smod \"example.com/mono/mods/%s\"\n", r, r)
	}
	deploy.WriteString(")\n\nenvironments: [Name=string]: core.#Environment & {metadata: name: Name}\nreleases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n\n")
	for i := range monoEnvs {
		fmt.Fprintf(&deploy, "environments: e%d: {namespace: \"e%d\", values: image: \"nginx:1.27.%d\"}\n", i, i, i)
	}
	for _, r := range releases {
		fmt.Fprintf(&deploy, "releases: %s: #module: %smod\n", r, r)
	}
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/mono@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: \"github.com/opmodel/pipeline/catalog@v0\": v: \"v0.1.0\"\n",
		"deploy.cue":         deploy.String(),
		"README.md":          "# the platform\n",
	}
	for _, r := range releases {
		files["mods/"+r+"/mod.cue"] = monoModule(r, "1")
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "platform")
	git("checkout", "-q", "-b", "feature")
	writeFile(t, filepath.Join(dir, "mods", changed, "mod.cue"), monoModule(changed, "2"))
	git("commit", "-qam", "change one module")
	return dir
}

func monoModule(name, rev string) string {
	return fmt.Sprintf(`package %[1]s

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "example.com/mono/mods/%[1]s@v0", name: %[1]q, version: "0.1.0"}

#config: image: *"nginx:1.27" | string

#components: web: {
	core.#Workload
	core.#Configs
	spec: {
		workload: {type: "stateless", replicas: 1, container: {image: #config.image, ports: http: containerPort: 8080}}
		configs: "%[1]s-config": data: rev: %[2]q
	}
}
`, name, rev)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
