// Package encrypted recognises SOPS-encrypted values files and decrypts them
// in memory with github.com/getsops/sops/v3, the library Flux, helm-secrets
// and the sops CLI share, so a file encrypted by any of them reads here.
//
// A file is recognised by its sops metadata (a top-level "sops" map with a
// "mac" or a "lastmodified" stamp), never by its name; one whose MAC is
// missing is refused, as sops refuses it. The plaintext is returned to the caller and
// never written anywhere; errors name the file, the key types it accepts and
// where keys were looked for, never a value. The MAC check is not optional:
// a file edited without sops fails with a message saying so.
package encrypted

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/pgp"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/fault"
)

// Keys are decryption keys handed over in memory (a CI secret, a Dagger
// secret). With none, keys are looked for where the sops CLI looks:
// SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, SOPS_AGE_KEY_CMD, the user's
// sops/age/keys.txt, and each other key type's own environment.
type Keys struct {
	// AgeIdentities are age secret keys ("AGE-SECRET-KEY-1…"), one or
	// more per string, as in an age key file.
	AgeIdentities []string
}

// Format is the syntax of a decrypted file.
type Format string

// Formats the values loader reads.
const (
	YAML Format = "yaml"
	JSON Format = "json"
)

// Is reports whether data is a SOPS-encrypted YAML or JSON document: it
// holds a top-level "sops" map with sops' metadata (its "mac", or the
// "lastmodified" stamp every sops version writes). A file whose MAC was
// deleted is still one, and Decrypt refuses it. A file that fails to
// parse is not one (the values loader reports its syntax error).
func Is(data []byte) bool {
	var doc struct {
		Sops *struct {
			MAC          *string `json:"mac"`
			LastModified *string `json:"lastmodified"`
		} `json:"sops"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return false
	}
	return doc.Sops != nil && (doc.Sops.MAC != nil || doc.Sops.LastModified != nil)
}

// formatOf tells JSON from YAML by the first non-blank byte, as sops
// itself would by the extension; the name is not trusted.
func formatOf(data []byte) Format {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return JSON
	}
	return YAML
}

type store interface {
	LoadEncryptedFile(in []byte) (sops.Tree, error)
	EmitPlainFile(sops.TreeBranches) ([]byte, error)
}

// Decrypt returns the plaintext of the SOPS file data, named name in errors,
// in the same format. Failures are fault.Configuration (a key is missing
// or wrong) or fault.Validation (the file is malformed or was tampered
// with); none of them carries a value. The sops library's own log lines
// are never printed (they quote file content past every redactor).
func Decrypt(name string, data []byte, keys Keys) (plain []byte, format Format, err error) {
	quiet()
	defer func() {
		// The library panics on some tampered files (a type tag flipped
		// from str to bytes); its message may quote a value.
		if r := recover(); r != nil {
			plain, format = nil, ""
			err = fault.Validationf("values file %s: sops could not read it (the file was edited without sops, or is damaged); restore it from git or re-encrypt it with `sops`", name)
		}
	}()
	format = formatOf(data)
	var st store = sopsyaml.NewStore(&config.YAMLStoreConfig{})
	if format == JSON {
		st = sopsjson.NewStore(&config.JSONStoreConfig{})
	}
	tree, err := st.LoadEncryptedFile(data)
	if err != nil {
		return nil, "", fault.Validationf("values file %s: reading its sops metadata: %v", name, err)
	}
	if tree.Metadata.MessageAuthenticationCode == "" {
		return nil, "", fault.Validationf("values file %s carries sops metadata but no MAC (sops.mac is missing or empty), so nothing proves its values are the ones sops encrypted: sops refuses it too (\"File has no MAC\"); restore it from git or re-encrypt it with `sops`", name)
	}
	if n := len(tree.Branches); n > 1 {
		return nil, "", fault.Validationf("values file %s holds %d YAML documents (the second starts at line %d, after ---); a values file is one document holding one struct: merge them, or split them into one file each and pass each with -f", name, n, secondDocument(data))
	}
	key, err := dataKey(tree.Metadata, keys)
	if err != nil {
		cause, hint := keyTrouble(tree.Metadata, keys)
		if cause == "" {
			cause = err.Error()
		}
		return nil, "", fault.Wrap(fault.Configuration, fmt.Errorf("values file %s is encrypted with sops and no key here opens it:\n  the file accepts: %s\n  looked for: %s\n  cause: %s\n  hint: %s",
			name, accepted(tree.Metadata), lookedFor(tree.Metadata, keys), cause, hint))
	}
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(key, cipher)
	if err != nil {
		// The data key opened but a value does not decrypt with it: the
		// ciphertext (or the path it is bound to) was edited.
		return nil, "", fault.Validationf("values file %s: a value does not decrypt with the file's data key: the file was edited without sops (tampered or merged by hand); restore it from git or re-encrypt it with `sops`", name)
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, key, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil || stored != mac {
		// Neither MAC is printed: the computed one is a hash of the
		// plaintext, which someone could test guesses against.
		return nil, "", fault.Validationf("values file %s failed sops' integrity check (MAC mismatch): the file was changed without sops (tampered, or merged by hand); restore it from git or edit it with `sops %s`", name, name)
	}
	plain, err = st.EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, "", fault.Validationf("values file %s: writing its decrypted values: %v", name, errors.Unwrap(err))
	}
	return plain, format, nil
}

// dataKey opens the file's data key: with the given age identities (and
// every other key type as the sops CLI would), through a key service that
// hands the identities to sops directly, so nothing goes through the
// process environment and any number of key groups works; else the way
// the sops CLI does.
func dataKey(md sops.Metadata, keys Keys) ([]byte, error) {
	if len(keys.AgeIdentities) > 0 {
		var ids age.ParsedIdentities
		if err := ids.Import(keys.AgeIdentities...); err != nil {
			// age's parse error quotes no key material.
			return nil, fmt.Errorf("the age key given is not an age secret key: %w", err)
		}
		svc := keyservice.NewCustomLocalClient(memoryKeys{ids: ids})
		return md.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{svc}, nil)
	}
	// The library runs SOPS_AGE_KEY_CMD whenever it is set, and crashes on
	// an empty one (a CI input left blank).
	if v, ok := os.LookupEnv(age.SopsAgeKeyCmdEnv); ok && strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("%s is set but empty: unset it or give the command that prints the age key", age.SopsAgeKeyCmdEnv)
	}
	return md.GetDataKey()
}

// accepted lists the key types and public identifiers (age recipients,
// PGP fingerprints, KMS ARNs) the file was encrypted to.
func accepted(md sops.Metadata) string {
	var out []string
	for _, g := range md.KeyGroups {
		for _, k := range g {
			s := k.TypeToIdentifier() + " " + k.ToString()
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return "(no keys listed)"
	}
	return strings.Join(out, ", ")
}

// lookedFor says where keys were looked for, for the error: the places
// of the key types the file accepts.
func lookedFor(md sops.Metadata, keys Keys) string {
	if len(keys.AgeIdentities) > 0 {
		return "the age key handed to this run (secret input), and the environment for other key types"
	}
	rs := recipients(md)
	var places []string
	for _, env := range []string{age.SopsAgeKeyEnv, age.SopsAgeKeyFileEnv, age.SopsAgeKeyCmdEnv, age.SopsAgeSshPrivateKeyFileEnv} {
		state := "unset"
		if v, ok := os.LookupEnv(env); ok {
			state = "set"
			if v == "" {
				state = "set but empty"
			}
		}
		places = append(places, env+" ("+state+")")
	}
	if p := userKeysFile(); p != "" {
		places = append(places, p)
	}
	places = append(places, "~/.ssh/id_ed25519 and ~/.ssh/id_rsa (as age keys)")
	if len(rs[pgp.KeyTypeIdentifier]) > 0 {
		places = append(places, "gpg's keyring ("+gnupgHome()+")")
	}
	places = append(places, "the environment of other key types (cloud KMS credentials)")
	return strings.Join(places, ", ")
}

// secondDocument is the line where a YAML stream's second document
// starts: the line after the first "---" that follows content.
func secondDocument(data []byte) int {
	content := false
	for i, l := range strings.Split(string(data), "\n") {
		// A document marker starts a line: "---" alone or before a space
		// (an armored key's "-----BEGIN" is not one).
		marker := l == "---" || strings.HasPrefix(l, "--- ")
		t := strings.TrimSpace(l)
		switch {
		case marker && content:
			return i + 2
		case !marker && t != "" && !strings.HasPrefix(t, "#"):
			content = true
		}
	}
	return 0
}
