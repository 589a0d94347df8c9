package values_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/encrypted/encryptedtest"
	"github.com/opmodel/pipeline/engine/values"
)

func encryptedFile(t *testing.T, plain, name string) (path string, key encryptedtest.AgeKey) {
	t.Helper()
	key, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	enc, err := encryptedtest.Encrypt([]byte(plain), false, key.Recipient)
	assert.NilError(t, err)
	path = filepath.Join(t.TempDir(), name)
	assert.NilError(t, os.WriteFile(path, enc, 0o644))
	return path, key
}

// The file is recognised by its content: even named .txt it decrypts,
// and every value it sets is marked secret.
func TestReadDecryptsSopsFilesAndMarksTheirValuesSecret(t *testing.T) {
	path, key := encryptedFile(t, "db: {password: pw-9f3k2, port: 5432}\n", "prod.txt")
	s, err := values.Read(cuecontext.New(), values.Input{Name: path}, encrypted.Keys{AgeIdentities: []string{key.Identity}})
	assert.NilError(t, err)
	assert.DeepEqual(t, s.Data, map[string]any{"db": map[string]any{"password": "pw-9f3k2", "port": 5432.0}})
	o, ok := s.Origin("db", "password")
	assert.Assert(t, ok && o.Secret)
	assert.Assert(t, is.Contains(o.Source, "(sops)"))

	base := set(t, `{db: {host: "h"}, image: "app:1"}`, "release")
	assert.Assert(t, !base.HasSecrets())
	base.Merge(s)
	assert.Assert(t, base.HasSecrets())
	assert.DeepEqual(t, base.Secrets(), []string{"pw-9f3k2", "5432"})
}

func TestSecretInputIsSecretEvenInPlaintext(t *testing.T) {
	s, err := values.Read(cuecontext.New(), values.Input{Name: "values-secret", Data: []byte(`{"token": "abcd-1234"}`), Secret: true}, encrypted.Keys{})
	assert.NilError(t, err)
	assert.DeepEqual(t, s.Secrets(), []string{"abcd-1234"})

	_, err = values.Read(cuecontext.New(), values.Input{Name: "values-secret", Data: []byte("token: [abcd-1234"), Secret: true}, encrypted.Keys{})
	assert.ErrorContains(t, err, "details withheld")
	assert.Assert(t, !strings.Contains(err.Error(), "abcd-1234"), "%v", err)
}

// A label may hold dots (Spring's property names): the secret's path is
// one label, and the stand-in replaces exactly that value.
func TestSecretPathsKeepDottedLabelsWhole(t *testing.T) {
	s := set(t, `{spring: datasource: password: "public-default", image: "app:1"}`, "release")
	path, key := encryptedFile(t, "\"spring.datasource.password\": pw-9f3k2\n", "v.yaml")
	sec, err := values.Read(cuecontext.New(), values.Input{Name: path}, encrypted.Keys{AgeIdentities: []string{key.Identity}})
	assert.NilError(t, err)
	s.Merge(sec)
	assert.DeepEqual(t, s.SecretPaths(), [][]string{{"spring.datasource.password"}})
	assert.DeepEqual(t, s.Secrets(), []string{"pw-9f3k2"})
	o, ok := s.Origin("spring", "datasource", "password")
	assert.Assert(t, ok && !o.Secret, "the nested public field keeps its own origin")
	got := s.StandIn(func(any) any { return "stand-in" })
	assert.Equal(t, got.Data["spring.datasource.password"], "stand-in")
	assert.Check(t, !got.HasSecrets(), "a stand-in set holds nothing secret")
	assert.Check(t, s.HasSecrets(), "the set itself keeps its secrets")
	assert.Equal(t, s.Data["spring.datasource.password"], "pw-9f3k2", "the set is copied")
	assert.DeepEqual(t, got.Data["spring"], s.Data["spring"])
}

func TestRedactKeepsPositions(t *testing.T) {
	msg := `values.pin: conflicting values 7 and string (mismatched types int and string):
      prod.yaml:7:6
values.password: invalid value "pw-9f3k2" (out of bound =~"^[a-z]+$"): pw-9f3k2`
	got := values.Redact(msg, []string{"pw-9f3k2", "7"})
	assert.Equal(t, got, `values.pin: conflicting values (secret) and string (mismatched types int and string):
      prod.yaml:7:6
values.password: invalid value (secret) (out of bound =~"^[a-z]+$"): (secret)`)
}

// Where a message quotes a value, a secret is masked however short; a
// public word equal to a secret is left alone, so the mask is no oracle.
func TestRedactQuotedMasksOnlyQuotedValues(t *testing.T) {
	secrets := []string{"changed", "Ab3x9Q", "70123"}
	for in, want := range map[string]string{
		`spec.ports[0].name: Invalid value: "Ab3x9Q": a lowercase RFC 1123 label`:            `spec.ports[0].name: Invalid value: (secret): a lowercase RFC 1123 label`,
		`[spec.ports[0].port: Invalid value: 70123: must be between 1 and 65535, inclusive]`: `[spec.ports[0].port: Invalid value: (secret): must be between 1 and 65535, inclusive]`,
		`field spec.x = "changed"`:        `field spec.x = (secret)`,
		`immutable spec.selector changed`: `immutable spec.selector changed`,
		`Invalid value: 701234: too big`:  `Invalid value: 701234: too big`,
		// Object dumps an immutable refusal carries, JSON and Go syntax.
		`{"TerminationGracePeriodSeconds":70123,"x":1}`:     `{"TerminationGracePeriodSeconds":(secret),"x":1}`,
		`core.PodSpec{TerminationGracePeriodSeconds:70123}`: `core.PodSpec{TerminationGracePeriodSeconds:(secret)}`,
		`selector app=Ab3x9Q, tier=web`:                     `selector app=(secret), tier=web`,
		`{"name":"Ab3x9Q-x"}`:                               `{"name":"Ab3x9Q-x"}`,
	} {
		assert.Equal(t, values.RedactQuoted(in, secrets), want)
	}
}

// A SOPS file piped in (`-f -`: in memory, named "stdin", no extension)
// is decrypted and stays secret, as the file itself would.
func TestPipedSOPSFileStaysSecret(t *testing.T) {
	path, key := encryptedFile(t, "password: pw-9f3k2\n", "v.yaml")
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	s, err := values.Read(cuecontext.New(), values.Input{Name: "stdin", Data: b}, encrypted.Keys{AgeIdentities: []string{key.Identity}})
	assert.NilError(t, err)
	assert.Check(t, s.HasSecrets())
	assert.DeepEqual(t, s.Secrets(), []string{"pw-9f3k2"})
}
