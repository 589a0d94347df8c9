package taint

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"gotest.tools/v3/assert"
)

// A sentinel differs from the value and keeps what a schema checks.
func FuzzSentinelDiffersAndKeepsShape(f *testing.F) {
	for _, s := range []string{"4711", "pw-9f3k2", "", "!!", "Zz9", "spring.datasource.password"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Sentinel(s).(string)
		assert.Assert(t, got != s, "sentinel of %q is itself", s)
		if strings.ContainsAny(strings.ToLower(s), "0123456789abcdefghijklmnopqrstuvwxyz") {
			assert.Equal(t, len(got), len(s))
			assert.Equal(t, utf8.ValidString(got), utf8.ValidString(s))
		}
	})
}

func TestSentinelNumbersKeepDigitCountAndSign(t *testing.T) {
	for in, want := range map[float64]float64{4711: 5822, 9: 1, 90: 11, -7: -8, 0: 1, 1.5: 2.6, 999: 1110} {
		got := Sentinel(in).(float64)
		assert.Assert(t, got != in)
		if in != 999 {
			assert.Equal(t, got, want, "sentinel of %v", in)
		}
	}
	assert.Equal(t, Sentinel(true), false)
}

// What a function derives from the secret differs between the renders,
// whatever the function; a public field equal to the secret's text does
// not, so it is never masked (no oracle).
func TestCompareFindsDerivedValuesAndOnlyThem(t *testing.T) {
	doc := func(pin string) map[string]any {
		sum := sha256.Sum256([]byte(pin))
		return map[string]any{
			"metadata": map[string]any{
				"name":        "cfg-" + pin,
				"annotations": map[string]any{"checksum/secret": hex.EncodeToString(sum[:])},
			},
			"data": map[string]any{
				"b64":          base64.StdEncoding.EncodeToString([]byte(pin)),
				"upper":        strings.ToUpper("x" + pin),
				"public":       "4711", // a public string that equals the PIN
				"token-" + pin: "v",
			},
		}
	}
	real := doc("4711")
	fields := Compare(real, doc(Sentinel("4711").(string)))
	var paths []string
	for _, f := range fields {
		paths = append(paths, strings.Join(f.Path, "/")+map[bool]string{true: "(key)"}[f.Key])
	}
	assert.DeepEqual(t, paths, []string{
		"data/b64", "data/token-4711(key)", "data/upper",
		"metadata/annotations/checksum/secret", "metadata/name",
	})
	masked := Mask(real, fields, func(any) any { return "(secret)" }, func(string) string { return "(secret-key)" }).(map[string]any)
	data := masked["data"].(map[string]any)
	assert.Equal(t, data["public"], "4711")
	assert.Equal(t, data["(secret-key)"], "(secret)")
	assert.Equal(t, masked["metadata"].(map[string]any)["name"], "(secret)")
	assert.Equal(t, real["metadata"].(map[string]any)["name"], "cfg-4711", "Mask copies")
	assert.Assert(t, NameTainted(fields))
}

func TestObjectsPairsRenamedObjectsAndTaintsOrphans(t *testing.T) {
	obj := func(kind, name string, data string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": "a"}, "data": map[string]any{"k": data}}
	}
	real := []map[string]any{obj("ConfigMap", "plain", "x"), obj("ConfigMap", "cfg-4711", "x"), obj("Secret", "only-real", "y")}
	sent := []map[string]any{obj("ConfigMap", "cfg-5822", "x"), obj("ConfigMap", "plain", "x")}
	got := Objects(real, sent)
	assert.Equal(t, len(got[0]), 0)
	assert.DeepEqual(t, got[1], []Field{{Path: []string{"metadata", "name"}}})
	assert.DeepEqual(t, got[2], []Field{{Path: []string{"data"}}, {Path: []string{"metadata", "name"}}, {Path: []string{"metadata", "namespace"}}})
}
