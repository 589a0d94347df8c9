package taint

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
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

// A shape stand-in differs from the value in every digit and letter,
// keeps its length and each character's class, and is the same for every
// value of the shape but where a character would have stayed.
func FuzzShapeStandInDiffersAndKeepsShape(f *testing.F) {
	for _, s := range []string{"4711", "fresh-1", "", "!!", "Zz9", "a", "0"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		got := ShapeVariant(0)(s).(string)
		assert.Assert(t, got != s, "stand-in of %q is itself", s)
		if strings.ContainsAny(strings.ToLower(s), "0123456789abcdefghijklmnopqrstuvwxyz") {
			assert.Equal(t, len(got), len(s))
			assert.Equal(t, shape(got), shape(s))
			for i := range s {
				if shape(s[i:i+1]) != s[i:i+1] {
					assert.Assert(t, got[i] != s[i], "character %d of %q stayed in %q", i, s, got)
				}
			}
		}
		assert.Equal(t, ShapeVariant(0)(s), got, "not stable")
		if len(other) == len(s) && shape(other) == shape(s) {
			theirs := ShapeVariant(0)(other).(string)
			for i := range got {
				// Where neither value had the drawn character, the
				// stand-ins agree.
				if got[i] != theirs[i] {
					assert.Assert(t, strings.ContainsRune("0aA", rune(got[i])) || strings.ContainsRune("0aA", rune(theirs[i])), "%q and %q, one shape, differ at %d: %q, %q", s, other, i, got, theirs)
				}
			}
		}
	})
}

// The point of a shape stand-in: a value moved to another of its shape has
// the stand-in it had, so its trace is a cache hit. Of the ten values
// fresh-0 … fresh-9, only the one whose digit the draw gave gets another.
func TestShapeStandInsOfOneShapeAreOne(t *testing.T) {
	seen := map[string]int{}
	for d := range 10 {
		seen[ShapeVariant(0)(fmt.Sprintf("fresh-%d", d)).(string)]++
	}
	assert.Equal(t, len(seen), 2, "%v", seen)
	for standIn, n := range seen {
		assert.Assert(t, n == 9 || n == 1, "%q for %d values", standIn, n)
	}
	assert.Assert(t, ShapeVariant(0)("fresh-1") != ShapeVariant(1)("fresh-1"), "variants draw alike")
	for _, in := range []float64{4711, 9, 90, -7, 0, 1.5, 999, -12.25, 100000, 1, 10} {
		got := ShapeVariant(0)(in).(float64)
		assert.Assert(t, got != in, "stand-in of %v is itself", in)
		assert.Equal(t, got < 0, in < 0, "stand-in of %v is %v: another sign", in, got)
		assert.Equal(t, got == math.Trunc(got), in == math.Trunc(in), "stand-in of %v is %v: integrality", in, got)
		digits := func(f float64) int { return len(strconv.FormatFloat(math.Abs(f), 'f', -1, 64)) }
		assert.Equal(t, digits(got), digits(in), "stand-in of %v is %v", in, got)
	}
	assert.Equal(t, ShapeVariant(0)(true), false)
}

func TestSentinelNumbersKeepDigitCountAndSign(t *testing.T) {
	for _, in := range []float64{4711, 9, 90, -7, 0, 1.5, 999, -12.25, 100000} {
		got := Sentinel(in).(float64)
		assert.Assert(t, got != in, "sentinel of %v is itself", in)
		assert.Equal(t, got < 0, in < 0, "sentinel of %v is %v: another sign", in, got)
		assert.Equal(t, got == math.Trunc(got), in == math.Trunc(in), "sentinel of %v is %v: integrality", in, got)
		digits := func(f float64) int { return len(strings.TrimLeft(strconv.FormatFloat(math.Abs(f), 'f', -1, 64), "0.")) }
		if in != 999 && in != 0 { // 999 → 1110 at worst: every digit moved past 9
			assert.Check(t, digits(got) >= digits(in)-1 && digits(got) <= digits(in)+1, "sentinel of %v is %v", in, got)
		}
		assert.Equal(t, Sentinel(in), got, "the sentinel of %v is not stable", in)
	}
	assert.Equal(t, Sentinel(true), false)
}

// Every character of a stand-in moves, by a step the secret decides: a
// module cannot compute a field that comes out the same for a secret and
// its stand-in. A fixed step of one kept code/2 for half the letters (so a
// review showed a token's characters' upper bits); here the share of
// secrets whose first character keeps code/2 is near 1 in 25, and the
// steps are spread over the class.
func TestStandInStepsAreUnpredictable(t *testing.T) {
	const n = 2000
	kept := 0
	steps := map[int]bool{}
	for i := range n {
		s := fmt.Sprintf("tok%dxq", i*7919)
		got := Sentinel(s).(string)
		assert.Equal(t, len(got), len(s))
		for j := range s {
			assert.Assert(t, got[j] != s[j], "character %d of %q stayed in %q", j, s, got)
		}
		if got[0]/2 == s[0]/2 {
			kept++
		}
		steps[(int(got[1])-int(s[1])+26)%26] = true
	}
	assert.Check(t, kept < n/10, "%d of %d stand-ins keep code/2 of the first character", kept, n)
	assert.Check(t, len(steps) >= 20, "the steps take only %d values", len(steps))
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
