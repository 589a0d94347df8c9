package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/opmodel/pipeline"

// rank is a package's layer, higher importing lower only; -1 for a
// package outside the layers (tests' helpers, tools).
func rank(pkg string) int {
	p := strings.TrimPrefix(pkg, module+"/")
	switch {
	case strings.HasPrefix(p, "cmd/"), strings.HasPrefix(p, "actions"):
		return 5 // front doors
	case p == "pipeline/report":
		return 5 // reads results; no operation imports it
	case p == "pipeline", p == "pipeline/scaffold":
		return 4
	case p == "pipeline/review":
		return 3
	case strings.HasPrefix(p, "pipeline/"):
		return 2 // snapshot, change, operation, rollout
	case strings.HasPrefix(p, "engine/"), p == "catalog", p == "buildinfo":
		return 1
	}
	return -1
}

// Every import between ranked packages goes down (or stays in its layer,
// as the engine's packages do), so that, for example, the engine never
// reaches for pipeline, and no operation formats its own results.
func TestImportsGoDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from := rank(f[0])
		if from < 0 {
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := rank(imp)
			if to < 0 {
				continue
			}
			checked++
			if to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d): data flows one way, downwards (CONTRIBUTING.md)", f[0], from, imp, to)
			}
			if to == from && from == 2 && strings.HasPrefix(f[0], module+"/pipeline/") && imp != f[0] {
				// snapshot, change, operation and rollout are peers:
				// none builds on another, so each can be used alone.
				t.Errorf("%s imports its peer %s: the packages below the operations stand alone", f[0], imp)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d imports checked: go list no longer lists what this test expects", checked)
	}
}
