package manifest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// A published manifest digest or change ID is a guessing oracle for any
// Secret data in the manifest: everything else is in the repository, so
// anyone can render again with a guessed value and compare (a 4-digit PIN
// falls in 10 000 renders). Public outputs therefore show a release that
// holds secret data by sealed identifiers: HMAC-SHA-256 under a key that
// never leaves the operator's CI secrets (or a random one per run), which
// nobody without the key can recompute. The operator's own outputs (render
// -o json, the inventory) keep the recomputable digest.

// SealedDigestPrefix starts a sealed manifest digest.
const SealedDigestPrefix = "hmac-sha256:"

// SealedChangePrefix starts a sealed change ID.
const SealedChangePrefix = "change-hmac-"

// Sealer seals the identifiers of releases that hold secret data.
type Sealer struct{ key []byte }

// NewSealer returns a Sealer keyed by key; with an empty key, by a random
// key of this run (sealed identifiers then differ from run to run).
func NewSealer(key []byte) *Sealer {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // crypto/rand never fails on Linux
	}
	return &Sealer{key: key}
}

func (s *Sealer) mac(kind, v string) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(v))
	return hex.EncodeToString(h.Sum(nil))
}

// Derive returns a key for another use (purpose), derived from the
// sealer's: runs with the same seal key derive the same one, and it
// reveals nothing about the seal key. Nil for a nil Sealer.
func (s *Sealer) Derive(purpose string) []byte {
	if s == nil {
		return nil
	}
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("derive\x00" + purpose))
	return h.Sum(nil)
}

// Digest seals a manifest digest; an empty one stays empty.
func (s *Sealer) Digest(d string) string {
	if d == "" {
		return ""
	}
	return SealedDigestPrefix + s.mac("digest", d)
}

// ChangeID seals a change ID (8 hex characters, as change IDs have).
func (s *Sealer) ChangeID(id string) string {
	if id == "" {
		return ""
	}
	return SealedChangePrefix + s.mac("change", id)[:8]
}

// HoldsSecretData reports whether any object is a v1 Secret with data or
// stringData: its digest depends on values the repository does not show.
func HoldsSecretData(rs []Resource) bool {
	for _, r := range rs {
		if r.Object.GetKind() == "Secret" && r.Object.GetAPIVersion() == "v1" {
			if r.Object.Object["data"] != nil || r.Object.Object["stringData"] != nil {
				return true
			}
		}
	}
	return false
}
