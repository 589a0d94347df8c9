package render

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// What finding the secrets' reach costs: the releases of the attacker's
// fixture (secrets from an input: one render more each), rendered with
// and without it. Only releases with secrets pay it.
// go test -run '^$' -bench SecretTracing ./engine/render
func BenchmarkSecretTracing(b *testing.B) {
	dir := deploytest.AttackDir(b, "prod", deploytest.AttackInput, "", "")
	in := []values.Input{{Name: "values-secret", Data: []byte(deploytest.AttackValues(deploytest.AttackCanary, deploytest.AttackPIN)), Secret: true}}
	for _, rel := range []string{"attack", "pin"} {
		for _, traced := range []bool{true, false} {
			name := rel + "/untraced"
			if traced {
				name = rel + "/traced"
			}
			b.Run(name, func(b *testing.B) {
				opts := Options{Dir: dir, Environment: "production", Releases: []string{rel}, Values: in, untraced: !traced}
				for b.Loop() {
					rels, err := Render(context.Background(), opts)
					assert.NilError(b, err)
					assert.Equal(b, len(rels[0].SecretFields) > 0, traced)
				}
			})
		}
	}
}

// The second render finds every field a secret reaches in the fixture,
// and only those: the public ones stay as they are.
func TestTraceFindsTheFixturesSecretFields(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	for _, source := range []deploytest.AttackSource{deploytest.AttackSOPS, deploytest.AttackRepo, deploytest.AttackSOPSV2} {
		t.Run(string(source), func(t *testing.T) {
			t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
			dir := deploytest.AttackDir(t, "prod", source, deploytest.AttackCanary, deploytest.AttackPIN)
			rels, err := Render(context.Background(), Options{Dir: dir, Environment: "production", Releases: []string{"attack"}})
			assert.NilError(t, err)
			got := map[string][]string{}
			for i, r := range rels[0].Resources {
				for _, f := range rels[0].SecretFields[i] {
					got[r.Object.GetName()] = append(got[r.Object.GetName()], strings.Join(f.Path, "/"))
				}
			}
			assert.DeepEqual(t, got, map[string][]string{
				"attack-config": {"data/dsn", "data/encoded", "data/upper", "metadata/annotations/checksum/secret"},
				"attack-creds":  {"stringData/canary", "stringData/pin", "stringData/spring.datasource.password"},
				"cfg-0815":      {"metadata/name"},
			})
			for _, s := range []string{deploytest.AttackCanary, deploytest.AttackPIN} {
				assert.Assert(t, slices.Contains(rels[0].Secrets, s), "%s is among the secrets to redact", s)
			}
		})
	}
}

// An object's kind or apiVersion that a secret reaches is a render error
// that names neither: kinds are shown everywhere, so one derived from a
// secret would publish it.
func TestKindFromASecretIsARenderError(t *testing.T) {
	for _, field := range []string{"kind", "apiVersion"} {
		t.Run(field, func(t *testing.T) {
			obj := `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "x", data: a: "b"}`
			// The group of an apiVersion, so the stand-in is a valid one too.
			obj = strings.Replace(obj, field+`: "`+map[string]string{"kind": "ConfigMap", "apiVersion": "v1"}[field]+`"`,
				field+": "+map[string]string{"kind": "#config.t", "apiVersion": `"\(#config.t)/v1"`}[field], 1)
			dir := deploytest.Write(t, map[string]string{"deploy.cue": `package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

releases: r: core.#ModuleRelease & {
	metadata: {name: "r", namespace: "ns"}
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/kind/r@v0", name: "r", version: "0.1.0"}
		#config: t: string
		#components: raw: {
			core.#Objects
			spec: objects: [` + obj + `]
		}
	}
}
`})
			secret := map[string]string{"kind": "ConfigMapSecretKind", "apiVersion": "secret.example"}[field]
			in := []values.Input{{Name: "values-secret", Data: []byte("t: " + secret + "\n"), Secret: true}}
			_, err := Render(context.Background(), Options{Dir: dir, Releases: []string{"r"}, Values: in})
			assert.ErrorContains(t, err, "the "+field+" of the release's object number 1 (in apply order) is derived from a secret value")
			assert.Check(t, !strings.Contains(err.Error(), secret), "the error names the secret: %v", err)
		})
	}
}

// A release whose trace needs exactly the values one probe replaced (a
// repository value that reaches a Secret, no SOPS) renders with stand-ins
// once, not twice: standIns renders each set of paths once, in any order,
// and a different set again.
func TestStandInsRenderEachSetOfPathsOnce(t *testing.T) {
	set := &values.Set{Data: map[string]any{"a": "pin-1234", "b": map[string]any{"c.d": "x"}}}
	renders := 0
	s := newStandIns(set, func(v *values.Set) (any, []map[string]any, error) {
		renders++
		return v.Data, nil, nil
	})
	first, _, err := s.with([][]string{{"a"}, {"b", "c.d"}}, 0)
	assert.NilError(t, err)
	again, _, err := s.with([][]string{{"b", "c.d"}, {"a"}}, 0)
	assert.NilError(t, err)
	assert.Equal(t, renders, 1)
	assert.DeepEqual(t, first, again)
	assert.Assert(t, first.(map[string]any)["a"] != "pin-1234", "the value was not replaced: %v", first)
	assert.Equal(t, set.Data["a"], "pin-1234", "the set itself changed")

	_, _, err = s.with([][]string{{"a"}}, 0)
	assert.NilError(t, err)
	_, _, err = s.with([][]string{{"b", "c", "d"}}, 0)
	assert.NilError(t, err)
	assert.Equal(t, renders, 3, "another set of paths renders again")
}

// A hostile module computes fields that a stand-in may leave alike for
// the secret and itself, to have a review show them unmasked: each
// character's code halved ('a' and 'b' give the same: a fixed one-step
// stand-in left about half), or its parity (one bit, which any single
// stand-in keeps about 12 times in 25, whatever its steps). With stand-in
// steps the module cannot predict, and three independent stand-ins, at
// most a stray few of 20 stay unmasked, never enough to rebuild the token.
func TestAModuleCannotDesignFieldsTheStandInMisses(t *testing.T) {
	const token = "kq7Xw2RfT9bZc4LmN8pV"
	for name, c := range map[string]struct {
		function string
		most     int
	}{
		"halves": {"div(strings.ByteAt(#config.token, %d), 2)", 1},
		"parity": {"mod(strings.ByteAt(#config.token, %d), 2)", 3},
	} {
		t.Run(name, func(t *testing.T) {
			var fields strings.Builder
			for i := range len(token) {
				fmt.Fprintf(&fields, "c%02d: \"\\(%s)\"\n", i, fmt.Sprintf(c.function, i))
			}
			dir := tokenConfigMap(t, "hostile", name, fields.String())
			in := []values.Input{{Name: "values-secret", Data: []byte("token: " + token + "\n"), Secret: true}}
			rels, err := Render(context.Background(), Options{Dir: dir, Releases: []string{"r"}, Values: in})
			assert.NilError(t, err)
			masked := map[string]bool{}
			for _, f := range rels[0].SecretFields[0] {
				masked[strings.Join(f.Path, "/")] = true
			}
			var shown []string
			for i := range len(token) {
				if !masked[fmt.Sprintf("data/c%02d", i)] {
					shown = append(shown, fmt.Sprintf("c%02d", i))
				}
			}
			assert.Check(t, len(shown) <= c.most, "fields derived from the token left unmasked: %v", shown)
		})
	}
}

// A render that fails on a value derived from a secret does not quote it:
// the same render with stand-ins fails alike, and every token of the error
// that differs between the two derives from a secret and is masked; the
// rest (positions, the constraint, a public value) stays to say what is
// wrong. Checked for an upper-cased copy against a bound, a prefix that
// conflicts with a literal, a number computed from the secret, and a
// constraint only the secret fails.
func TestRenderErrorsMaskWhatASecretDerives(t *testing.T) {
	const token = "kq7Xw2RfT9bZc4LmN8pV"
	for name, c := range map[string]struct {
		field  string
		hidden []string
		shown  []string
	}{
		"upper-cased against a bound": {`upper: strings.ToUpper(#config.token) & =~"^[a-z]+$"`, []string{strings.ToUpper(token)}, []string{"^[a-z]+$", "deploy.cue:"}},
		"a prefix conflicting":        {`prefix: strings.SliceRunes(#config.token, 0, 7) & "fixed"`, []string{token[:7]}, []string{`"fixed"`, "deploy.cue:"}},
		"a number out of bound":       {`n: "\(strings.ByteAt(#config.token, 0) * 1000 & <100)"`, []string{fmt.Sprint(int(token[0]) * 1000)}, []string{"<100", "deploy.cue:"}},
		// Only the real value fails: nothing to compare, so every quoted
		// string and number of the error is masked.
		"only the secret fails": {`up: strings.ToUpper(#config.token) & !="` + strings.ToUpper(token) + `"`, []string{strings.ToUpper(token)}, []string{"out of bound", "deploy.cue:"}},
		// A field label spelled from the secret's character codes, on a
		// value only the secret fails: the path is unquoted, and nothing
		// to compare says it derives from the secret.
		"a label built from the secret": {`derived: {"x\(strings.Join([for c in strings.Split(#config.token, "") {"\(strings.ByteAt(c, 0))"}], "_"))": strings.ToUpper(#config.token) & !="` + strings.ToUpper(token) + `"}`,
			[]string{codes(token), codes(token)[:11]}, []string{"out of bound", "deploy.cue:"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := tokenConfigMap(t, "fails", "derived", c.field)
			in := []values.Input{{Name: "values-secret", Data: []byte("token: " + token + "\n"), Secret: true}}
			_, err := Render(context.Background(), Options{Dir: dir, Releases: []string{"r"}, Values: in})
			assert.Assert(t, err != nil)
			for _, h := range append(c.hidden, token) {
				assert.Check(t, !strings.Contains(err.Error(), h), "the error shows %q: %v", h, err)
			}
			for _, s := range c.shown {
				assert.Check(t, strings.Contains(err.Error(), s), "the error lost %q: %v", s, err)
			}
		})
	}
}

// The stand-in renders take the components the stand-ins do not reach
// from the real render instead of transforming them again (reusable): on
// every fixture, what that finds a secret reaches is what transforming
// every component again finds — fields, derived secrets, values shown.
func TestStandInReuseTracesAsTheWholeRender(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
	mixed := deploytest.Write(t, map[string]string{"deploy.cue": `package deploy

import core "github.com/opmodel/pipeline/catalog@v0"

releases: r: core.#ModuleRelease & {
	metadata: {name: "r", namespace: "ns"}
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/mixed/r@v0", name: "r", version: "0.1.0"}
		#config: {token: string, image: *"nginx:1.27" | string}
		#components: {
			plain: {
				core.#Workload
				core.#Configs
				spec: {
					workload: {type: "stateless", replicas: 1, container: {image: #config.image, ports: http: containerPort: 8080}}
					configs: "plain": data: key: "public"
				}
			}
			reached: {
				core.#Configs
				core.#Secrets
				spec: {
					configs: "reached": data: checksum: "cs-\(#config.token)"
					secrets: "reached": data: token: #config.token
				}
			}
			labelled: {
				core.#Configs
				metadata: labels: "example.com/owner": #config.token
				spec: configs: "labelled": data: key: "public"
			}
		}
	}
}
`})
	cases := map[string]struct {
		dir, env, release string
		in                []values.Input
	}{
		"mixed": {mixed, "", "r", []values.Input{{Name: "values-secret", Data: []byte("token: t0k3nValue99\n"), Secret: true}}},
	}
	deploytest.Registry(t, deploytest.V2Modules()...)
	for _, source := range []deploytest.AttackSource{deploytest.AttackSOPS, deploytest.AttackRepo, deploytest.AttackSOPSV2} {
		dir := deploytest.AttackDir(t, "prod", source, deploytest.AttackCanary, deploytest.AttackPIN)
		for _, rel := range []string{"attack", "pin"} {
			cases[string(source)+"/"+rel] = struct {
				dir, env, release string
				in                []values.Input
			}{dir, "production", rel, nil}
		}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			render := func(whole bool) *Release {
				rels, err := Render(context.Background(), Options{Dir: c.dir, Environment: c.env, Releases: []string{c.release}, Values: c.in, wholeStandIns: whole})
				assert.NilError(t, err)
				return rels[0]
			}
			reused, whole := render(false), render(true)
			assert.DeepEqual(t, reused.SecretFields, whole.SecretFields)
			assert.DeepEqual(t, reused.Secrets, whole.Secrets)
			assert.Equal(t, string(reused.Values), string(whole.Values))
			assert.Equal(t, reused.ManifestDigest, whole.ManifestDigest)
			assert.Assert(t, len(reused.SecretFields) > 0)
		})
	}
}

// tokenConfigMap writes a deployment of one release, r, whose module (at
// test.example/<module>/r) takes a token and renders one ConfigMap,
// named name, whose data holds the CUE fields data (which may use the
// strings package and #config.token).
func tokenConfigMap(t *testing.T, module, name, data string) string {
	t.Helper()
	return deploytest.Write(t, map[string]string{"deploy.cue": `package deploy

import (
	"strings"
	core "github.com/opmodel/pipeline/catalog@v0"
)

releases: r: core.#ModuleRelease & {
	metadata: {name: "r", namespace: "ns"}
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/` + module + `/r@v0", name: "r", version: "0.1.0"}
		#config: token: string
		#components: raw: {
			core.#Objects
			spec: objects: [{apiVersion: "v1", kind: "ConfigMap", metadata: name: "` + name + `", data: {
` + data + `
}}]
		}
	}
}
`})
}

// codes is s's bytes as decimal codes joined by "_", as the module above
// spells them.
func codes(s string) string {
	var out []string
	for i := range len(s) {
		out = append(out, fmt.Sprint(int(s[i])))
	}
	return strings.Join(out, "_")
}

// A release's own values (no secret source at all) that a Secret holds:
// eight plain parts of a DSN, then a PIN, all in one Secret, the PIN's
// sha256 in a ConfigMap annotation. Every one of the nine is decided: the
// PIN is traced into the annotation, however many values precede it, and
// the public parts, whose stand-ins change the Secret too, are secret as
// well — nothing is left untraced for being the ninth.
func TestEveryRepositoryValueASecretHoldsIsTraced(t *testing.T) {
	parts := []string{"host-db1", "port5432", "user-app", "name-shop", "ssl-require", "pool-ten", "schema-app", "zone-eu1"}
	var config, values, dsn []string
	for i, p := range parts {
		config = append(config, fmt.Sprintf("p%d: string", i))
		values = append(values, fmt.Sprintf("p%d: %q", i, p))
		dsn = append(dsn, fmt.Sprintf(`\(#config.p%d)`, i))
	}
	dir := deploytest.Write(t, map[string]string{"deploy.cue": `package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	core "github.com/opmodel/pipeline/catalog@v0"
)

releases: r: core.#ModuleRelease & {
	metadata: {name: "r", namespace: "ns"}
	#module: {
		core.#Module
		metadata: {apiVersion: "test.example/ninth/r@v0", name: "r", version: "0.1.0"}
		#config: {
			` + strings.Join(config, "\n\t\t\t") + `
			pin: string
		}
		#components: raw: {
			core.#Objects
			spec: objects: [{apiVersion: "v1", kind: "Secret", metadata: name: "db", stringData: dsn: "` + strings.Join(dsn, ";") + `;pin=\(#config.pin)"},
				{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "c", annotations: "checksum/pin": hex.Encode(sha256.Sum256(#config.pin))}, data: x: "y"}]
		}
	}
	values: {
		` + strings.Join(values, "\n\t\t") + `
		pin: "4827"
	}
}
`})
	rels, err := Render(context.Background(), Options{Dir: dir, Releases: []string{"r"}})
	assert.NilError(t, err)
	r := rels[0]
	var annotation bool
	for i, res := range r.Resources {
		if res.Object.GetKind() == "ConfigMap" && i < len(r.SecretFields) {
			for _, f := range r.SecretFields[i] {
				annotation = annotation || strings.Join(f.Path, "/") == "metadata/annotations/checksum/pin"
			}
		}
	}
	assert.Assert(t, annotation, "the ninth value's checksum is not traced: %v", r.SecretFields)
	assert.Assert(t, slices.Contains(r.Secrets, "4827"), "the PIN is not among the secrets to redact: %v", r.Secrets)
}
