package render_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/opmodel/pipeline/engine/render"
)

// generatedModule has n components, each a Deployment, a Service and a
// ConfigMap, all reading the release's values.
func generatedModule(n int) string {
	var b strings.Builder
	b.WriteString(`package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion: "test.example/deploy/app@v0"
	name:       "app"
	version:    "1.0.0"
}

#config: {
	image:    *"nginx:1.27" | string
	replicas: *1 | int
}

#components: {
`)
	for i := range n {
		fmt.Fprintf(&b, `	"svc-%d": {
		core.#Workload
		core.#Service
		core.#Configs
		spec: {
			workload: {type: "stateless", replicas: #config.replicas, container: {image: #config.image, ports: http: containerPort: 8080, env: INDEX: "%d"}}
			service: ports: http: {port: 80, targetPort: 8080}
			configs: "svc-%d-config": data: index: "%d"
		}
	}
`, i, i, i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// BenchmarkRender measures how render time grows with the number of
// components (three objects each). Run with `make bench` or
// `go test -bench Render ./engine/render`.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("components-%d", n), func(b *testing.B) {
			dir := deployment(b, `
environments: staging: {namespace: "staging", values: replicas: 2}
releases: myapp: {#module: _app}
`, "app/app.cue", generatedModule(n))
			b.ResetTimer()
			for b.Loop() {
				rels, err := render.Render(b.Context(), render.Options{Dir: dir, Environment: "staging"})
				if err != nil {
					b.Fatal(err)
				}
				if got := len(rels[0].Resources); got != 3*n {
					b.Fatalf("rendered %d objects, want %d", got, 3*n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/component")
		})
	}
}
