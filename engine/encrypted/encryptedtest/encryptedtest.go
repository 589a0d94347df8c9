// Package encryptedtest makes SOPS-encrypted files for tests, the way
// `sops --encrypt --age RECIPIENT` does, without the sops binary: a fresh
// age key, a file encrypted to it, and a tampered copy.
package encryptedtest

import (
	"fmt"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

// AgeKey is a generated age key pair.
type AgeKey struct {
	Identity  string // AGE-SECRET-KEY-1…
	Recipient string // age1…
}

// NewAgeKey generates an age key pair.
func NewAgeKey() (AgeKey, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return AgeKey{}, fmt.Errorf("generating an age key: %w", err)
	}
	return AgeKey{Identity: id.String(), Recipient: id.Recipient().String()}, nil
}

type store interface {
	LoadPlainFile([]byte) (sops.TreeBranches, error)
	EmitEncryptedFile(sops.Tree) ([]byte, error)
}

// Encrypt encrypts plain (YAML, or JSON when json is set) to the age
// recipients, every value encrypted, as sops does by default.
func Encrypt(plain []byte, json bool, recipients ...string) ([]byte, error) {
	return EncryptGroups(plain, json, 0, recipients)
}

// EncryptGroups encrypts plain to several key groups of age recipients,
// as `sops --shamir-secret-sharing-threshold N` with a key_groups
// creation rule does: opening it takes a key of threshold groups (all
// groups when threshold is 0).
func EncryptGroups(plain []byte, json bool, threshold int, groups ...[]string) ([]byte, error) {
	var st store = sopsyaml.NewStore(&config.YAMLStoreConfig{})
	if json {
		st = sopsjson.NewStore(&config.JSONStoreConfig{})
	}
	branches, err := st.LoadPlainFile(plain)
	if err != nil {
		return nil, fmt.Errorf("reading the plaintext: %w", err)
	}
	var kgs []sops.KeyGroup
	for _, recipients := range groups {
		var group sops.KeyGroup
		for _, r := range recipients {
			mk, err := sopsage.MasterKeyFromRecipient(r)
			if err != nil {
				return nil, fmt.Errorf("age recipient %s: %w", r, err)
			}
			group = append(group, keys.MasterKey(mk))
		}
		kgs = append(kgs, group)
	}
	md := sops.Metadata{KeyGroups: kgs, Version: sopsVersion}
	if len(kgs) > 1 {
		md.ShamirThreshold = threshold
		if threshold == 0 {
			md.ShamirThreshold = len(kgs)
		}
	}
	tree := sops.Tree{Branches: branches, Metadata: md}
	dataKey, errs := tree.GenerateDataKey()
	if len(errs) > 0 {
		return nil, fmt.Errorf("encrypting the data key: %v", errs)
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		return nil, fmt.Errorf("encrypting values: %w", err)
	}
	tree.Metadata.LastModified = time.Now().UTC()
	if tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339)); err != nil {
		return nil, fmt.Errorf("encrypting the MAC: %w", err)
	}
	return st.EmitEncryptedFile(tree)
}

// sopsVersion is written into the metadata, as the sops CLI of the
// library version in go.mod would.
const sopsVersion = "3.13.0"
