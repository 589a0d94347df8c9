//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
)

// exportFile writes the peer release's objects in CUE alone: every
// component of releases.bench put through each transformer of the
// catalog's Kubernetes provider that matches it, with the #context opm
// gives it, and the outputs (an object, or a map or list of them)
// flattened into one list. Which transformers match is decided here, in
// Go, as opm decides it (required labels, resources and traits; a
// comprehension over #components doing it in CUE comes out incomplete
// in v0.17.1): CUE evaluates and exports the transforms.
func exportFile(t *testing.T, dir string) string {
	d, err := load.Load(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
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
	labels := func(v cue.Value) map[string]string {
		out := map[string]string{}
		_ = v.Decode(&out)
		return out
	}
	var calls []string
	names, err := load.FieldNames(comps)
	if err != nil {
		t.Fatal(err)
	}
	fqns, err := load.FieldNames(transformers)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		c := comps.LookupPath(cue.MakePath(cue.Str(name)))
		res, traits := keys(c.LookupPath(cue.MakePath(cue.Def("#resources")))), keys(c.LookupPath(cue.MakePath(cue.Def("#traits"))))
		have := labels(c.LookupPath(cue.ParsePath("metadata.labels")))
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
			for k, v := range labels(tr.LookupPath(cue.ParsePath("requiredLabels"))) {
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
`
}

// metadataOf is a component's labels and annotations as opm hands them
// to a transformer (each value as its text), as CUE fields to add to
// #componentMetadata; "" when it has neither.
func metadataOf(c cue.Value) string {
	out := ""
	for _, f := range []string{"labels", "annotations"} {
		m := map[string]any{}
		if err := c.LookupPath(cue.MakePath(cue.Str("metadata"), cue.Str(f))).Decode(&m); err != nil || len(m) == 0 {
			continue
		}
		text := map[string]string{}
		for k, v := range m {
			text[k] = fmt.Sprint(v)
		}
		b, _ := json.Marshal(text)
		out += fmt.Sprintf(", %s: %s", f, b)
	}
	return out
}

// TestBenchRenderAgainstCUEExport compares opm's render of the peer
// benchmark's 1 000-object release with CUE evaluating the same objects
// from the same catalog and module as one evaluation and exporting them
// (what `cue export` does: load, build, marshal; exportFile). The objects
// must be the same, leaf for leaf. The CPU of each (user + system of this
// process, so the collector counts, medians of alternated runs) is printed
// against issue 62's goal: opm ≤ 0.6× CUE.
func TestBenchRenderAgainstCUEExport(t *testing.T) {
	work := t.TempDir()
	dir := peerDeployment(t, filepath.Join(work, "opm"), "bench", 250, 0)
	exported := peerDeployment(t, filepath.Join(work, "cue"), "bench", 250, 0)
	if err := os.WriteFile(filepath.Join(exported, "export.cue"), []byte(exportFile(t, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	opm := func() []string {
		rels, err := render.Render(t.Context(), render.Options{Dir: dir, Releases: []string{"bench"}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rels[0].Resources {
			out = append(out, canonical(t, r.Object.Object))
		}
		return out
	}
	export := func() []string {
		d, err := load.Load(t.Context(), exported)
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Root.LookupPath(cue.ParsePath("objects")).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var objs []map[string]any
		if err := json.Unmarshal(b, &objs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, canonical(t, o))
		}
		return out
	}
	a, b := opm(), export()
	slices.Sort(a)
	slices.Sort(b)
	if len(a) != 1000 || !slices.Equal(a, b) {
		t.Fatalf("CUE's export and opm's render differ: %d and %d objects", len(b), len(a))
	}
	var opmCPU, cueCPU []time.Duration
	for range repeat {
		opmCPU = append(opmCPU, cpu(func() { opm() }))
		cueCPU = append(cueCPU, cpu(func() { export() }))
	}
	o, c := medianOf(opmCPU), medianOf(cueCPU)
	ratio := o.Seconds() / c.Seconds()
	fmt.Printf("bench render-1000-cpu-vs-cue-export opm=%.2fs cue=%.2fs ratio=%.2f%s\n", o.Seconds(), c.Seconds(), ratio, verdict("render-1000-cpu-vs-cue-export", ratio))
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

// cpu is the user and system CPU this process spends in fn, the
// collector's included.
func cpu(fn func()) time.Duration {
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	fn()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	used := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return used(after) - used(before)
}

// medianOf is the median of ds.
func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
