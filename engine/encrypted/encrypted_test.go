package encrypted_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/encrypted/encryptedtest"
	"github.com/opmodel/pipeline/engine/fault"
)

const plain = "password: hunter2-secret\nnested:\n    pin: \"0042\"\n"

func fixture(t *testing.T, json bool) (encryptedtest.AgeKey, []byte) {
	t.Helper()
	key, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	in := []byte(plain)
	if json {
		in = []byte(`{"password": "hunter2-secret", "nested": {"pin": "0042"}}`)
	}
	enc, err := encryptedtest.Encrypt(in, json, key.Recipient)
	assert.NilError(t, err)
	assert.Assert(t, !bytes.Contains(enc, []byte("hunter2")), "the fixture is not encrypted")
	return key, enc
}

// noKeysHere points every place the sops CLI looks for age keys at
// nothing, so a test sees only the keys it hands over.
func noKeysHere(t *testing.T) {
	for _, env := range []string{"SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "SOPS_AGE_KEY_CMD"} {
		t.Setenv(env, "") // restored after the test
		assert.NilError(t, os.Unsetenv(env))
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
}

func TestIsRecognisesSopsByMetadataNotName(t *testing.T) {
	_, enc := fixture(t, false)
	_, encJSON := fixture(t, true)
	assert.Assert(t, encrypted.Is(enc))
	assert.Assert(t, encrypted.Is(encJSON))
	assert.Assert(t, !encrypted.Is([]byte(plain)))
	// A values file that happens to have a "sops" field is not encrypted.
	assert.Assert(t, !encrypted.Is([]byte("sops: {enabled: true}\n")))
	assert.Assert(t, !encrypted.Is([]byte("not: [valid")))
}

func TestDecryptWithGivenAgeKey(t *testing.T) {
	noKeysHere(t)
	for _, json := range []bool{false, true} {
		key, enc := fixture(t, json)
		out, format, err := encrypted.Decrypt("prod.sops", enc, encrypted.Keys{AgeIdentities: []string{key.Identity}})
		assert.NilError(t, err)
		assert.Assert(t, is.Contains(string(out), "hunter2-secret"))
		assert.Assert(t, is.Contains(string(out), "0042"))
		if json {
			assert.Equal(t, format, encrypted.JSON)
		} else {
			assert.Equal(t, format, encrypted.YAML)
		}
	}
}

func TestDecryptWithKeyFromEnvironmentLikeTheSopsCLI(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	t.Setenv("SOPS_AGE_KEY", key.Identity)
	out, _, err := encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(out), "hunter2-secret"))

	assert.NilError(t, os.Unsetenv("SOPS_AGE_KEY"))
	f := filepath.Join(t.TempDir(), "keys.txt")
	assert.NilError(t, os.WriteFile(f, []byte(key.Identity+"\n"), 0o600))
	t.Setenv("SOPS_AGE_KEY_FILE", f)
	out, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(out), "hunter2-secret"))
}

// failsWithout checks an error's class and that it carries no value.
func failsWithout(t *testing.T, err error, kind fault.Kind, wants ...string) {
	t.Helper()
	assert.Assert(t, err != nil)
	assert.Equal(t, fault.KindOf(err), kind, "%v", err)
	for _, w := range wants {
		assert.Assert(t, is.Contains(err.Error(), w))
	}
	for _, v := range []string{"hunter2", "0042"} {
		assert.Assert(t, !strings.Contains(err.Error(), v), "the error shows a value: %v", err)
	}
}

func TestMissingKeySaysWhatTheFileAcceptsAndWhereKeysWereLookedFor(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	_, _, err := encrypted.Decrypt("secrets/prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "secrets/prod.sops.yaml", "age "+key.Recipient, "SOPS_AGE_KEY (unset)", "SOPS_AGE_KEY_FILE (unset)", "sops/age/keys.txt")

	// Set but empty (a CI input left blank): the sops library would
	// crash on an empty command; this is a clear error instead.
	t.Setenv("SOPS_AGE_KEY_CMD", "")
	_, _, err = encrypted.Decrypt("secrets/prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "SOPS_AGE_KEY_CMD is set but empty")
}

func TestWrongKeyIsAConfigurationError(t *testing.T) {
	noKeysHere(t)
	_, enc := fixture(t, false)
	other, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{AgeIdentities: []string{other.Identity}})
	failsWithout(t, err, fault.Configuration, "prod.sops.yaml", "not one of the file's age recipients", "secret input")
	assert.Assert(t, !strings.Contains(err.Error(), other.Identity), "the error shows the key given")

	t.Setenv("SOPS_AGE_KEY", other.Identity)
	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "SOPS_AGE_KEY (set)")

	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{AgeIdentities: []string{"not-a-key"}})
	failsWithout(t, err, fault.Configuration, "not an age secret key")
}

func TestTamperedFileFailsTheIntegrityCheck(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	keys := encrypted.Keys{AgeIdentities: []string{key.Identity}}

	// A value dropped: every other value still decrypts, only the MAC
	// over all of them tells.
	var kept []string
	for _, l := range strings.Split(string(enc), "\n") {
		if !strings.HasPrefix(l, "password:") {
			kept = append(kept, l)
		}
	}
	_, _, err := encrypted.Decrypt("prod.sops.yaml", []byte(strings.Join(kept, "\n")), keys)
	failsWithout(t, err, fault.Validation, "integrity check (MAC mismatch)", "changed without sops")

	// A value moved to another key: its ciphertext is bound to its path.
	moved := strings.Replace(string(enc), "password:", "passw0rd:", 1)
	_, _, err = encrypted.Decrypt("prod.sops.yaml", []byte(moved), keys)
	failsWithout(t, err, fault.Validation, "edited without sops")
}
