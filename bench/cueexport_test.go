//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/load"
)

// exportFile writes the peer release's objects in CUE alone: every
// component of releases.bench put through each transformer of the
// catalog's Kubernetes provider that matches it, with the #context opm
// gives it, and the outputs (an object, or a map or list of them)
// flattened into one list. Which transformers match is decided here, in
// Go, as opm decides it (required labels, resources and traits; a
// comprehension over #components doing it in CUE comes out incomplete
// in v0.17.1): CUE evaluates and exports the transforms.
func exportFile(dir string) (string, error) {
	d, err := load.Load(context.Background(), dir)
	if err != nil {
		return "", err
	}
	comps := d.Root.LookupPath(cue.MakePath(cue.Str("releases"), cue.Str("bench"), cue.Def("#module"), cue.Def("#components")))
	transformers := d.Catalog.LookupPath(cue.MakePath(cue.Def("#KubernetesProvider"), cue.Str("transformers")))
	keys := func(v cue.Value) map[string]bool {
		out := map[string]bool{}
		names, _ := load.FieldNames(v)
		for _, n := range names {
			out[n] = true
		}
		return out
	}
	var calls []string
	names, err := load.FieldNames(comps)
	if err != nil {
		return "", err
	}
	fqns, err := load.FieldNames(transformers)
	if err != nil {
		return "", err
	}
	for _, name := range names {
		c := comps.LookupPath(cue.MakePath(cue.Str(name)))
		res, traits := keys(c.LookupPath(cue.MakePath(cue.Def("#resources")))), keys(c.LookupPath(cue.MakePath(cue.Def("#traits"))))
		have := texts(c.LookupPath(cue.ParsePath("metadata.labels")))
	transformers:
		for _, fqn := range fqns {
			tr := transformers.LookupPath(cue.MakePath(cue.Str(fqn)))
			for r := range keys(tr.LookupPath(cue.ParsePath("requiredResources"))) {
				if !res[r] {
					continue transformers
				}
			}
			for r := range keys(tr.LookupPath(cue.ParsePath("requiredTraits"))) {
				if !traits[r] {
					continue transformers
				}
			}
			for k, v := range texts(tr.LookupPath(cue.ParsePath("requiredLabels"))) {
				if have[k] != v {
					continue transformers
				}
			}
			calls = append(calls, fmt.Sprintf("\t(core.#KubernetesProvider.transformers[%[1]q].#transform & {#component: _components[%[2]q], #context: _context & {#componentMetadata: {name: %[2]q%[3]s}}}).output,", fqn, name, metadataOf(c)))
		}
	}
	return `package deploy

import (
	"list"
	core "github.com/opmodel/pipeline/catalog@v0"
)

_meta:       releases.bench.metadata
_components: releases.bench.#module.#components
_context: core.#TransformerContext & {
	name:      _meta.name
	namespace: _meta.namespace
	#moduleReleaseMetadata: {
		name:      _meta.name
		namespace: _meta.namespace
		fqn:       _meta.fqn
		version:   _meta.version
		identity:  _meta.identity
		labels:    _meta.labels
	}
}
_perTransform: [
` + strings.Join(calls, "\n") + `
]
objects: list.FlattenN([for o in _perTransform {
	[if o.apiVersion != _|_ {o}, if o.apiVersion == _|_ for _, x in o {x}]
}], 1)
`, nil
}

// texts is a map of labels or annotations as opm reads them: every value
// as its text; empty when v does not decode as a map.
func texts(v cue.Value) map[string]string {
	m := map[string]any{}
	_ = v.Decode(&m)
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// metadataOf is a component's labels and annotations as opm hands them
// to a transformer, as CUE fields to add to #componentMetadata; "" when it
// has neither.
func metadataOf(c cue.Value) string {
	out := ""
	for _, f := range []string{"labels", "annotations"} {
		if m := texts(c.LookupPath(cue.MakePath(cue.Str("metadata"), cue.Str(f)))); len(m) > 0 {
			b, _ := json.Marshal(m)
			out += fmt.Sprintf(", %s: %s", f, b)
		}
	}
	return out
}

// The bench's test binary, run again as a child (TestMain), writes the
// export file of the deployment envCUEExportFile names, or exports the
// deployment envCUEExport names, instead of running tests; either writes
// to envCUEExportOut.
const (
	envCUEExportFile = "OPM_BENCH_CUE_EXPORT_FILE"
	envCUEExport     = "OPM_BENCH_CUE_EXPORT"
	envCUEExportOut  = "OPM_BENCH_CUE_EXPORT_OUT"
)

// TestMain runs the bench, or, as a child of TestBenchRenderAgainstCUEExport,
// CUE's export of one deployment: in a process of its own, so neither its
// CPU nor its memory is the bench's (a child's peak RSS, which other cases
// report, starts from its parent's).
func TestMain(m *testing.M) {
	out := os.Getenv(envCUEExportOut)
	var err error
	switch {
	case os.Getenv(envCUEExportFile) != "":
		var text string
		if text, err = exportFile(os.Getenv(envCUEExportFile)); err == nil {
			err = os.WriteFile(out, []byte(text), 0o644)
		}
	case os.Getenv(envCUEExport) != "":
		err = cueExport(os.Getenv(envCUEExport), out)
	default:
		os.Exit(m.Run())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// cueExport is `cue export -e objects` of dir: load, build, marshal.
func cueExport(dir, out string) error {
	d, err := load.Load(context.Background(), dir)
	if err != nil {
		return err
	}
	b, err := d.Root.LookupPath(cue.ParsePath("objects")).MarshalJSON()
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// TestBenchRenderAgainstCUEExport compares `opm render` of the peer
// benchmark's 1 000-object release with CUE evaluating the same objects
// from the same catalog and module as one evaluation and exporting them
// (what `cue export` does: load, build, marshal; exportFile), each in a
// process of its own. The objects must be the same, leaf for leaf. The CPU
// of each process (user + system, so the collector counts; medians of
// alternated runs) is printed against issue 62's goal: opm ≤ 0.6× CUE.
func TestBenchRenderAgainstCUEExport(t *testing.T) {
	work := t.TempDir()
	opmBin := buildOpm(t, work)
	dir := peerDeployment(t, filepath.Join(work, "rendered"), "bench", 250, 0)
	exported := peerDeployment(t, filepath.Join(work, "exported"), "bench", 250, 0)
	cpuOf := func(cmd *exec.Cmd) (time.Duration, []byte) {
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), stdout.Bytes()
	}
	write := exec.Command(os.Args[0])
	write.Env = append(os.Environ(), envCUEExportFile+"="+dir, envCUEExportOut+"="+filepath.Join(exported, "export.cue"))
	cpuOf(write)
	opm := func() (time.Duration, []string) {
		cmd := exec.Command(opmBin, "render", dir, "--release", "bench", "-o", "json")
		cmd.Env = append(os.Environ(), "OPM_CACHE_DIR=off")
		cpu, out := cpuOf(cmd)
		var doc struct {
			Releases []struct {
				Resources []map[string]any `json:"resources"`
			} `json:"releases"`
		}
		if err := json.Unmarshal(out, &doc); err != nil || len(doc.Releases) != 1 {
			t.Fatalf("opm render -o json: %v", err)
		}
		return cpu, canonicals(t, doc.Releases[0].Resources)
	}
	outFile := filepath.Join(work, "objects.json")
	export := func() (time.Duration, []string) {
		cmd := exec.Command(os.Args[0])
		// With the collector setting opm runs with (internal/gctune), so
		// the comparison is of the evaluations.
		cmd.Env = append(os.Environ(), envCUEExport+"="+exported, envCUEExportOut+"="+outFile, "GOGC=400")
		cpu, _ := cpuOf(cmd)
		b, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		var objs []map[string]any
		if err := json.Unmarshal(b, &objs); err != nil {
			t.Fatal(err)
		}
		return cpu, canonicals(t, objs)
	}
	var rendered, exportedObjs []string
	o, c := medianPair(func() (cpu time.Duration) {
		cpu, rendered = opm()
		return cpu
	}, func() (cpu time.Duration) {
		cpu, exportedObjs = export()
		return cpu
	})
	if len(rendered) != 1000 || !slices.Equal(rendered, exportedObjs) {
		t.Fatalf("CUE's export and opm's render differ: %d and %d objects", len(exportedObjs), len(rendered))
	}
	ratio := o.Seconds() / c.Seconds()
	fmt.Printf("bench render-1000-cpu-vs-cue-export opm=%.2fs cue=%.2fs ratio=%.2f%s\n", o.Seconds(), c.Seconds(), ratio, verdict("render-1000-cpu-vs-cue-export", ratio))
}

// canonicals are the objects' JSON with sorted keys (encoding/json sorts
// map keys), sorted.
func canonicals(t *testing.T, objs []map[string]any) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, canonical(t, o))
	}
	slices.Sort(out)
	return out
}

// canonical is an object's JSON with sorted keys (encoding/json sorts
// map keys).
func canonical(t *testing.T, o map[string]any) string {
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
