package render

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// cacheModule writes a deployment whose module's components read #config
// in every way the component cache keys on: a field (a or b), #config
// whole, a field of the module that reads #config, nothing; config is
// the #config declaration. Its Secrets hold the canary.
func cacheModule(t *testing.T, config string) string {
	t.Helper()
	var comps strings.Builder
	for i := range 4 {
		fmt.Fprintf(&comps, "\tra%d: {core.#Configs, spec: configs: \"ra%d\": data: v: #config.a}\n", i, i)
		fmt.Fprintf(&comps, "\trb%d: {core.#Secrets, spec: secrets: \"rb%d\": data: {v: #config.b, pin: %q}}\n", i, i, cacheCanary)
		fmt.Fprintf(&comps, "\trn%d: {core.#Configs, spec: configs: \"rn%d\": data: v: \"still\"}\n", i, i)
	}
	comps.WriteString("\twhole: {core.#Configs, spec: configs: \"whole\": data: {for k, v in #config {(k): \"\\(v)\"}}}\n")
	comps.WriteString("\tvia: {core.#Configs, spec: configs: \"via\": data: v: _prefix}\n")
	module := `package cm

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/cm@v0", name: "cm", version: "0.1.0"}

` + config + `

_prefix: "p-\(#config.b)"

#components: {
` + comps.String() + "}\n"
	deploy := `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	cmmod "test.example/deploy/cm"
)

releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: cm: {#module: cmmod, metadata: namespace: "ns"}
`
	return deploytest.Write(t, map[string]string{"cm/cm.cue": module, "deploy.cue": deploy})
}

// cacheCanary is a Secret's value: no byte of the cache may give it away.
const cacheCanary = "canary-7f3a9c-pin"

// A render with the component cache builds only the components whose
// inputs moved — those that select the moved field of #config, read it
// whole, or read a field of the module — and renders, byte for byte, what
// a render without any cache renders. Where a field of #config reads
// another, every component is built when a value moves: the one value
// could move them all.
func TestComponentCacheBuildsWhatTheValuesMoved(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name, config string
		// built are the components built when a moves, then when b does.
		builtA, builtB int64
	}{
		{"fields", "#config: {\n\ta: *\"a0\" | string\n\tb: *\"b0\" | string\n}", 4 + 2, 4 + 2},
		{"tangled", "#config: {\n\ta: *\"a0\" | string\n\tb: *\"b-\\(a)\" | string\n}", 14, 14},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := cacheModule(t, c.config)
			cacheDir := t.TempDir()
			opts := Options{Dir: dir, Releases: []string{"cm"}, Parallelism: 4, shareLeast: 1,
				Cache: cache.Open(cacheDir, 0, nil).WithSealKey([]byte("a seal key of the test, 32 bytes"))}
			write := func(name, text string) string {
				p := filepath.Join(t.TempDir(), name)
				assert.NilError(t, os.WriteFile(p, []byte(text), 0o600))
				return p
			}
			steps := []struct {
				values string
				built  int64
			}{
				{"", 14},                             // cold: everything
				{"", 0},                              // nothing moved
				{"a: \"a1\"\n", c.builtA},            // a moved
				{"a: \"a1\"\n", 0},                   // again
				{"a: \"a1\"\nb: \"b1\"\n", c.builtB}, // b moved
			}
			for i, step := range steps {
				opts.ValuesFiles, opts.stats = nil, &transformStats{}
				if step.values != "" {
					opts.ValuesFiles = []string{write(fmt.Sprintf("values-%d.cue", i), step.values)}
				}
				got, err := Render(ctx, opts)
				assert.NilError(t, err)
				assert.Equal(t, opts.stats.cut.Load(), int64(1), "step %d: not a cut render", i)
				assert.Equal(t, opts.stats.built.Load(), step.built, "step %d: components built", i)

				plain := opts
				plain.Cache, plain.Parallelism, plain.stats = nil, 1, nil
				want, err := Render(ctx, plain)
				assert.NilError(t, err)
				assert.Equal(t, len(got), len(want))
				sameRelease(t, got[0], want[0])
			}
			assertNoCanary(t, cacheDir)
		})
	}
}

// assertNoCanary fails when any file under dir holds the canary in any
// encoding a reader could undo (canaryIn), or when there is no file.
func assertNoCanary(t *testing.T, dir string) {
	t.Helper()
	found, files, err := canaryIn(dir)
	assert.NilError(t, err)
	assert.Assert(t, files > 0, "nothing was cached")
	assert.Assert(t, len(found) == 0, "the canary is in %v", found)
}

// canaryIn lists the files under dir that hold the canary in any form a
// leak takes (redact.Encodings), or in base64 at any alignment inside a
// longer text; files counts them all.
func canaryIn(dir string) (found []string, files int, err error) {
	c := []byte(cacheCanary)
	var needles [][]byte
	for _, e := range redact.Encodings(cacheCanary) {
		needles = append(needles, []byte(e))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		// The canary inside a longer value encodes differently at each
		// offset mod 3: the groups that hold only its bytes are the same.
		for pad := range 3 {
			e := enc.EncodeToString(append(bytes.Repeat([]byte{'x'}, pad), c...))
			needles = append(needles, []byte(e[4*((pad+2)/3):len(e)-4]))
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, n) {
				found = append(found, p)
				break
			}
		}
		return nil
	})
	return found, files, err
}

// The canary search finds the canary however it is written.
func TestCanaryInFindsEveryEncoding(t *testing.T) {
	dir := t.TempDir()
	c := []byte(cacheCanary)
	plants := map[string][]byte{"plain": append([]byte("{\"pin\":\""), c...), "hex": []byte("ab" + hex.EncodeToString(c) + "cd")}
	for pad := range 3 {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
			text := append(append(bytes.Repeat([]byte{'y'}, pad), c...), []byte("tail")...)
			plants[fmt.Sprintf("b64-%d-%p", pad, enc)] = []byte("data: " + enc.EncodeToString(text))
		}
	}
	for name, b := range plants {
		assert.NilError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "clean"), []byte("nothing here"), 0o600))
	found, files, err := canaryIn(dir)
	assert.NilError(t, err)
	assert.Equal(t, files, len(plants)+1)
	assert.Equal(t, len(found), len(plants), "found %v", found)
}

// What the values moved is built on every goroutine, however the
// components that read them are laid out: eight components next to each
// other read the value that moves (their Secrets too, so the stand-in
// renders that trace it run on the same shares), eight after them do
// not. Two goroutines build four each — not one eight while the other
// waits — and the release is the one a single goroutine without a cache
// renders. Moved to b12, then to another value of its shape, the stand-in
// renders that trace it the second time are all the cache's
// (taint.ShapeVariant): only the eight real ones are built.
func TestMovedComponentsAreBuiltOnEveryGoroutine(t *testing.T) {
	var comps strings.Builder
	for i := range 8 {
		fmt.Fprintf(&comps, "\tmoved%d: {core.#Configs, core.#Secrets, spec: {configs: \"m%d\": data: v: #config.a, secrets: \"m%d\": data: v: #config.a}}\n", i, i, i)
	}
	for i := range 8 {
		fmt.Fprintf(&comps, "\tstill%d: {core.#Configs, spec: configs: \"s%d\": data: v: \"still\"}\n", i, i)
	}
	module := "package cm\n\nimport core \"github.com/opmodel/pipeline/catalog@v0\"\n\ncore.#Module\n\n" +
		"metadata: {apiVersion: \"test.example/deploy/cm@v0\", name: \"cm\", version: \"0.1.0\"}\n\n" +
		"#config: a: *\"a0\" | string\n\n#components: {\n" + comps.String() + "}\n"
	deploy := "package deploy\n\nimport (\n\tcore \"github.com/opmodel/pipeline/catalog@v0\"\n\tcmmod \"test.example/deploy/cm\"\n)\n\n" +
		"releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}\n" +
		"releases: cm: {#module: cmmod, metadata: namespace: \"ns\"}\n"
	dir := deploytest.Write(t, map[string]string{"cm/cm.cue": module, "deploy.cue": deploy})
	values := func(a string) []string {
		p := filepath.Join(t.TempDir(), "values.cue")
		assert.NilError(t, os.WriteFile(p, fmt.Appendf(nil, "a: %q\n", a), 0o600))
		return []string{p}
	}
	// A value of b12's shape whose stand-in is b12's.
	again := ""
	for d := range 100 {
		if v := fmt.Sprintf("c%02d", d); taint.ShapeVariant(0)(v) == taint.ShapeVariant(0)("b12") {
			again = v
			break
		}
	}
	assert.Assert(t, again != "")
	opts := Options{Dir: dir, Releases: []string{"cm"}, Parallelism: 2, shareLeast: 1,
		Cache: cache.Open(t.TempDir(), 0, nil).WithSealKey([]byte("a seal key of the test, 32 bytes"))}
	for i, step := range []struct {
		files    []string
		builds   []int
		standIns int64
	}{{nil, []int{8, 8}, 8}, {values("b12"), []int{4, 4}, 8}, {values(again), []int{4, 4}, 0}} {
		opts.ValuesFiles, opts.stats = step.files, &transformStats{}
		got, err := Render(context.Background(), opts)
		assert.NilError(t, err)
		assert.Equal(t, opts.stats.cut.Load(), int64(1), "step %d: not a cut render", i)
		assert.DeepEqual(t, opts.stats.builds, step.builds)
		assert.Equal(t, opts.stats.standInsBuilt.Load(), step.standIns, "step %d: stand-in components built", i)
		plain := opts
		plain.Cache, plain.Parallelism, plain.stats = nil, 1, nil
		want, err := Render(context.Background(), plain)
		assert.NilError(t, err)
		sameRelease(t, got[0], want[0])
		assert.Assert(t, len(got[0].SecretFields) > 0, "the value reaches the Secrets: the stand-in renders ran")
	}
}
