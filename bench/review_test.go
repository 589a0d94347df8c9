//go:build bench

package bench

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opmodel/pipeline/internal/gctune"
	"github.com/opmodel/pipeline/pipeline"
)

// TestBenchReview reviews base against head for 10 releases of 20
// components in 3 environments (60 renders), as the Action does on a pull
// request, concurrently (one goroutine per core) against the same review
// done one render after the other (Parallelism 1: the code path before
// renders ran concurrently). Both run in this process, with the opm
// command's collector settings; no cluster.
func TestBenchReview(t *testing.T) {
	gctune.Apply() // as the opm command does
	const releases, comps, envs = 10, 20, 3
	work := t.TempDir()
	side := func(name, rev string) string {
		dir := filepath.Join(work, name)
		rs := map[string]string{}
		for i := range releases {
			rs[fmt.Sprintf("app%02d", i)] = fmt.Sprintf("team-%02d", i)
		}
		es := map[string]string{}
		for i := range envs {
			es[fmt.Sprintf("env%d", i)] = "nginx:1.27." + rev
		}
		writeDeployment(t, dir, reviewModule(comps), rs, es)
		return dir
	}
	base, head := side("base", "0"), side("head", "1")
	review := func(parallelism int) time.Duration {
		start := time.Now()
		cs, err := pipeline.Review(t.Context(), pipeline.ReviewOptions{Selection: pipeline.Selection{Dir: head}, BaseDir: base, Parallelism: parallelism})
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs.Releases) != releases*envs {
			t.Fatalf("reviewed %d releases, want %d", len(cs.Releases), releases*envs)
		}
		// The image changes every Deployment: one modified object per component.
		if want := releases * envs * comps; cs.Counts.Modified != want {
			t.Fatalf("review found %d modified objects, want %d", cs.Counts.Modified, want)
		}
		return d
	}
	sequential, concurrent := medianPair(func() time.Duration { return review(1) }, func() time.Duration { return review(0) })
	fmt.Printf("bench review-%dx%d opm=%.2fs sequential=%.2fs ratio=%.2f\n", releases, envs, concurrent.Seconds(), sequential.Seconds(), concurrent.Seconds()/sequential.Seconds())
}

// reviewModule has comps components of a Deployment, a Service and a
// ConfigMap each, the Deployments using the image value.
func reviewModule(comps int) string {
	var mod strings.Builder
	mod.WriteString(`package mod

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "example.com/bench/mod@v0", name: "bench", version: "0.1.0"}

#config: image: *"nginx:1.27" | string

#components: {
`)
	for i := range comps {
		fmt.Fprintf(&mod, `	c%02[1]d: {
		core.#Workload
		core.#Service
		core.#Configs
		spec: {
			workload: {type: "stateless", replicas: 1, container: {image: #config.image, ports: http: containerPort: 8080}}
			service: ports: http: {port: 80, targetPort: 8080}
			configs: "c%02[1]d-config": data: key: "value-%[1]d"
		}
	}
`, i)
	}
	mod.WriteString("}\n")
	return mod.String()
}
