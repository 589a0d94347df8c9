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
	o, ok := s.Origin("db.password")
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

func TestMaskHidesSecretsAndWhatCarriesThem(t *testing.T) {
	s := set(t, `{image: "app:1", replicas: 2}`, "release")
	path, key := encryptedFile(t, "password: pw-9f3k2\npin: 7\n", "v.yaml")
	sec, err := values.Read(cuecontext.New(), values.Input{Name: path}, encrypted.Keys{AgeIdentities: []string{key.Identity}})
	assert.NilError(t, err)
	s.Merge(sec)
	// The effective values: a module default derived from the secret, and
	// unrelated values that merely contain the short PIN's digit.
	doc := []byte(`{"image":"app:1","replicas":2,"password":"pw-9f3k2","pin":7,"dsn":"postgres://u:pw-9f3k2@db","port":8070}`)
	out, err := s.Mask(doc)
	assert.NilError(t, err)
	assert.Equal(t, string(out), `{"dsn":"(secret)","image":"app:1","password":"(secret)","pin":"(secret)","port":8070,"replicas":2}`)
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
