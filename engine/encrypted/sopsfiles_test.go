package encrypted_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/encrypted/encryptedtest"
	"github.com/opmodel/pipeline/engine/fault"
)

// sops' own functional test no_mac.yaml, made here: a file whose mac line
// was deleted, or emptied, is refused, not read as plaintext.
func TestAFileWithoutItsMACIsRefused(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	keys := encrypted.Keys{AgeIdentities: []string{key.Identity}}
	var deleted, emptied []string
	for _, l := range strings.Split(string(enc), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "mac:") {
			emptied = append(emptied, "    mac: \"\"")
			continue
		}
		deleted = append(deleted, l)
		emptied = append(emptied, l)
	}
	for name, doc := range map[string]string{"deleted": strings.Join(deleted, "\n"), "emptied": strings.Join(emptied, "\n")} {
		assert.Assert(t, encrypted.Is([]byte(doc)), "%s: a file with sops metadata and no MAC is still a sops file", name)
		_, _, err := encrypted.Decrypt("prod.sops.yaml", []byte(doc), keys)
		failsWithout(t, err, fault.Validation, "prod.sops.yaml", "no MAC", "File has no MAC")
	}
}

// The Action's and Dagger's in-memory age key opens a file with two key
// groups exactly as SOPS_AGE_KEY holding both keys does; one key of two
// needed groups is told apart from a wrong key.
func TestInMemoryKeysOpenEveryKeyGroup(t *testing.T) {
	noKeysHere(t)
	a, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	b, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	enc, err := encryptedtest.EncryptGroups([]byte(plain), false, 0, []string{a.Recipient}, []string{b.Recipient})
	assert.NilError(t, err)

	out, _, err := encrypted.Decrypt("groups.sops.yaml", enc, encrypted.Keys{AgeIdentities: []string{a.Identity, b.Identity}})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(out), "hunter2-secret"))

	t.Setenv("SOPS_AGE_KEY", a.Identity+"\n"+b.Identity)
	out, _, err = encrypted.Decrypt("groups.sops.yaml", enc, encrypted.Keys{})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(out), "hunter2-secret"))

	_, _, err = encrypted.Decrypt("groups.sops.yaml", enc, encrypted.Keys{AgeIdentities: []string{a.Identity}})
	failsWithout(t, err, fault.Configuration, "open 1 of the file's 2 key groups, and it needs 2")

	// Two of three groups, with a threshold of two.
	c, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	enc, err = encryptedtest.EncryptGroups([]byte(plain), false, 2, []string{a.Recipient}, []string{b.Recipient}, []string{c.Recipient})
	assert.NilError(t, err)
	out, _, err = encrypted.Decrypt("groups.sops.yaml", enc, encrypted.Keys{AgeIdentities: []string{c.Identity, a.Identity}})
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(out), "hunter2-secret"))
}

// Each key error names its cause the way the sops CLI would tell it, and
// the next step for the file's key type.
func TestKeyErrorsNameTheirCause(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	other, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)

	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "cause: no age key was found here", "SOPS_AGE_KEY")

	t.Setenv("SOPS_AGE_KEY", other.Identity)
	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "cause: the age key(s) here are for "+other.Recipient+", not one of the file's age recipients ("+key.Recipient+")")
	assert.Assert(t, !strings.Contains(err.Error(), other.Identity))

	t.Setenv("SOPS_AGE_KEY", "AGE-SECRET-KEY-1NOTAKEY")
	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "cause: SOPS_AGE_KEY does not hold an age secret key")
	assert.Assert(t, !strings.Contains(err.Error(), "NOTAKEY"), "the malformed key is quoted: %v", err)

	assert.NilError(t, os.Unsetenv("SOPS_AGE_KEY"))
	t.Setenv("SOPS_AGE_KEY_FILE", "/nonexistent/keys.txt")
	_, _, err = encrypted.Decrypt("prod.sops.yaml", enc, encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "cause: SOPS_AGE_KEY_FILE names /nonexistent/keys.txt, which does not exist")
	assert.Assert(t, is.Contains(err.Error(), "SOPS_AGE_SSH_PRIVATE_KEY_FILE"), "the SSH keys sops reads are listed")
}

// A PGP-only file's error speaks of PGP and gpg's keyring, not of age.
func TestPGPOnlyFileHintsAtGPG(t *testing.T) {
	noKeysHere(t)
	t.Setenv("GNUPGHOME", t.TempDir())
	_, enc := fixture(t, false)
	// The fixture's age recipient swapped for a PGP key, as sops writes it.
	var out []string
	skip := false
	for _, l := range strings.Split(string(enc), "\n") {
		switch {
		case strings.HasPrefix(l, "    age:"):
			skip = true
			out = append(out, "    pgp:", "        - created_at: \"2026-01-01T00:00:00Z\"",
				"          enc: |-", "            -----BEGIN PGP MESSAGE-----", "            wcBMA0000000000000AQgA", "            -----END PGP MESSAGE-----",
				"          fp: 1022470DE3F0BC54BC6AB62DE05550BC07FB1A0A")
		case skip && strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "    lastmodified") && !strings.HasPrefix(l, "    mac") && !strings.HasPrefix(l, "    version") && !strings.HasPrefix(l, "    unencrypted"):
		default:
			skip = false
			out = append(out, l)
		}
	}
	_, _, err := encrypted.Decrypt("prod.sops.yaml", []byte(strings.Join(out, "\n")), encrypted.Keys{})
	failsWithout(t, err, fault.Configuration, "pgp 1022470DE3F0BC54BC6AB62DE05550BC07FB1A0A", "gpg --import", "GNUPGHOME=")
	assert.Assert(t, !strings.Contains(err.Error(), "age secret key"), "a PGP-only file's hint speaks of age: %v", err)
}

// sops' own log lines never reach stderr: a plaintext comment holding a
// secret (left by an old sops, outside the MAC) is not printed.
func TestSopsLogsNeverReachStderr(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	doc := strings.Replace(string(enc), "password:", "# canary-3f9a7c hunter2-secret\npassword:", 1)
	r, w, err := os.Pipe()
	assert.NilError(t, err)
	saved, err := syscall.Dup(2)
	assert.NilError(t, err)
	assert.NilError(t, syscall.Dup2(int(w.Fd()), 2))
	out, _, decErr := encrypted.Decrypt("prod.sops.yaml", []byte(doc), encrypted.Keys{AgeIdentities: []string{key.Identity}})
	assert.NilError(t, syscall.Dup2(saved, 2))
	assert.NilError(t, w.Close())
	printed, err := io.ReadAll(r)
	assert.NilError(t, err)
	assert.NilError(t, decErr)
	assert.Assert(t, is.Contains(string(out), "hunter2-secret"))
	assert.Equal(t, string(printed), "", "sops printed past the redactor")
}

// A multi-document encrypted file is named with a clear message, no value.
func TestMultiDocumentFileIsNamed(t *testing.T) {
	noKeysHere(t)
	key, err := encryptedtest.NewAgeKey()
	assert.NilError(t, err)
	enc, err := encryptedtest.Encrypt([]byte(plain+"---\nother: hunter2-secret\n"), false, key.Recipient)
	assert.NilError(t, err)
	_, _, err = encrypted.Decrypt("multi.sops.yaml", enc, encrypted.Keys{AgeIdentities: []string{key.Identity}})
	failsWithout(t, err, fault.Validation, "multi.sops.yaml holds 2 YAML documents (the second starts at line ")
	lines := strings.Split(string(enc), "\n")
	at := strings.Index(err.Error(), "starts at line ")
	var n int
	_, scanErr := fmt.Sscanf(err.Error()[at+len("starts at line "):], "%d", &n)
	assert.NilError(t, scanErr)
	assert.Assert(t, n >= 2 && n <= len(lines) && strings.TrimSpace(lines[n-2]) == "---", "line %d does not follow ---", n)
}

// A tampered type tag (str flipped to bytes, outside what the MAC covers
// in sops' eyes) makes the library panic; it is a clear error instead.
func TestTamperedTypeTagIsAnError(t *testing.T) {
	noKeysHere(t)
	key, enc := fixture(t, false)
	doc := strings.Replace(string(enc), ",type:str]", ",type:bytes]", 1)
	assert.Assert(t, doc != string(enc))
	_, _, err := encrypted.Decrypt("prod.sops.yaml", []byte(doc), encrypted.Keys{AgeIdentities: []string{key.Identity}})
	failsWithout(t, err, fault.Validation, "prod.sops.yaml")
}

// A plaintext file is called out when its name or the repository's
// .sops.yaml says it should be encrypted; a catch-all rule says nothing.
func TestMeantEncrypted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	assert.Equal(t, encrypted.MeantEncrypted(write("a/prod.sops.yaml", "x: 1\n")), "its name ends in .sops.yaml")
	assert.Equal(t, encrypted.MeantEncrypted(write("a/values.yaml", "x: 1\n")), "")
	write(".sops.yaml", "creation_rules:\n  - path_regex: secrets/.*\\.yaml$\n    age: age1xyz\n  - age: age1xyz\n")
	assert.Assert(t, is.Contains(encrypted.MeantEncrypted(write("secrets/prod.yaml", "x: 1\n")), `creation rule 1 of `+filepath.Join(dir, ".sops.yaml")+` (path_regex "secrets/.*\\.yaml$") matches it`))
	assert.Equal(t, encrypted.MeantEncrypted(write("config/prod.yaml", "x: 1\n")), "", "a catch-all rule says nothing")
}

// dotenv and INI sops files get a message naming the format.
func TestOtherSopsFormats(t *testing.T) {
	assert.Equal(t, encrypted.OtherSopsFormat([]byte("TOKEN=ENC[AES256_GCM,data:x,type:str]\nsops_version=3.13.0\nsops_mac=ENC[x]\n")), "dotenv")
	assert.Equal(t, encrypted.OtherSopsFormat([]byte("[app]\ntoken = ENC[x]\n[sops]\nversion = 3.13.0\n")), "INI")
	assert.Equal(t, encrypted.OtherSopsFormat([]byte("token: x\n")), "")
}
