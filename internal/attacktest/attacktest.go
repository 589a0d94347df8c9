// Package attacktest is the attacker's side of the secrets harness: it
// searches what opm published for the fixture's canary and PIN
// (deploytest.AttackDir) in every encoding, and tries every PIN against
// every identifier published.
package attacktest

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// Leaks returns how text shows the canary or the PIN: each in plain, upper
// and lower case, base64 and base64url, hex, URL- and JSON-escaped, and as
// its sha1, sha256 and md5. The PIN's plain forms count only where they
// are not part of a longer run of hex digits (a commit hash, an HMAC), as
// Shows decides.
func Leaks(text string) []string {
	var out []string
	for _, secret := range []string{deploytest.AttackCanary, deploytest.AttackCanary + "-db", deploytest.AttackPIN, deploytest.AttackCanary2, deploytest.AttackCanary2 + "-db", deploytest.AttackPIN2} {
		for _, enc := range leakForms(secret) {
			found := strings.Contains(text, enc.text)
			if len(secret) == 4 && enc.plain {
				found = deploytest.Shows(text, enc.text)
			}
			if found {
				out = append(out, fmt.Sprintf("%s of %q (%s)", enc.name, secret, enc.text))
			}
		}
	}
	return out
}

type leakForm struct {
	name, text string
	plain      bool
}

func leakForms(v string) []leakForm {
	var out []leakForm
	for _, e := range redact.Encodings(v) {
		out = append(out, leakForm{name: "an encoding", text: strings.TrimRight(e, "="), plain: !strings.ContainsAny(e, "=") && len(e) == len(v)})
	}
	b := []byte(v)
	s1, s256, m5 := sha1.Sum(b), sha256.Sum256(b), md5.Sum(b)
	for name, h := range map[string][]byte{"sha1": s1[:], "sha256": s256[:], "md5": m5[:]} {
		out = append(out, leakForm{name: name, text: hex.EncodeToString(h)})
	}
	return out
}

// Identifiers returns every token of text that looks like an identifier a
// reader could test guesses against: runs of 8 or more hex digits.
func Identifiers(text string) []string {
	return identifierRE.FindAllString(text, -1)
}

var identifierRE = regexp.MustCompile(`[0-9a-f]{8,}`)

// BruteForcePIN tries every PIN against every identifier published, as an
// attacker with the repository would: rel is the pin release (which holds
// nothing else secret) rendered with the real PIN; for each PIN its
// objects are derived as PinModule derives them, and the manifest digest
// (whole and as tables shorten it), change ID and the PIN's hashes are
// compared with the hex tokens of published. The attacker's renderer is
// checked first: for the real PIN it reproduces opm's identifiers, so a
// raw identifier anywhere would be found.
func BruteForcePIN(t testing.TB, rel *render.Release, published string) {
	t.Helper()
	tokens := map[string]bool{}
	for _, tok := range Identifiers(published) {
		tokens[tok] = true
	}
	identifiers := func(pin string) []string {
		rs := make([]manifest.Resource, len(rel.Resources))
		for i, r := range rel.Resources {
			obj := r.Object.DeepCopy()
			switch {
			case obj.GetKind() == "Secret":
				if err := unstructured.SetNestedField(obj.Object, pin, "stringData", "pin"); err != nil {
					t.Fatal(err)
				}
			case obj.GetName() == "pin-config":
				sum := sha256.Sum256([]byte(pin))
				obj.SetAnnotations(map[string]string{"checksum/pin": hex.EncodeToString(sum[:])})
			case strings.HasPrefix(obj.GetName(), "pin-"):
				obj.SetName("pin-" + pin)
			}
			rs[i] = r
			rs[i].Object = obj
		}
		manifest.Sort(rs)
		digest, err := manifest.Digest(rs)
		if err != nil {
			t.Fatal(err)
		}
		change := manifest.ChangeID(rel.Module.Path, rel.Module.Version, rel.ValuesText, digest)
		bare := strings.TrimPrefix(digest, "sha256:")
		s1, s256, m5 := sha1.Sum([]byte(pin)), sha256.Sum256([]byte(pin)), md5.Sum([]byte(pin))
		return []string{bare, bare[:12], strings.TrimPrefix(change, "change-sha1-"),
			hex.EncodeToString(s1[:]), hex.EncodeToString(s256[:]), hex.EncodeToString(m5[:])}
	}
	real := identifiers(deploytest.AttackPIN)
	if "sha256:"+real[0] != rel.ManifestDigest || "change-sha1-"+real[2] != rel.ChangeID {
		t.Fatalf("the attacker's renderer gives %s %s, opm %s %s: fix the test's copy of PinModule", real[0], real[2], rel.ManifestDigest, rel.ChangeID)
	}
	for n := range 10000 {
		pin := fmt.Sprintf("%04d", n)
		for _, id := range identifiers(pin) {
			if tokens[id] {
				t.Fatalf("PIN %s confirmed: %s is published", pin, id)
			}
		}
	}
}
