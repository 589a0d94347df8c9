package render

import (
	"context"
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
	for _, source := range []deploytest.AttackSource{deploytest.AttackSOPS, deploytest.AttackRepo} {
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
