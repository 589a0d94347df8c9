package manifest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// Digest is the manifest digest: SHA-256 over each object's JSON (map keys
// sorted by encoding/json) in apply order, newline-separated, as
// "sha256:<hex>". The input order does not matter; rs is not modified.
func Digest(rs []Resource) (string, error) {
	sorted := slices.Clone(rs)
	Sort(sorted)
	h := sha256.New()
	for i, r := range sorted {
		b, err := json.Marshal(r.Object.Object)
		if err != nil {
			return "", fmt.Errorf("serialising %s for the manifest digest: %w", r.ID(), err)
		}
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// ChangeID identifies one change of a release: the first 8 hex characters
// of SHA-1 over module path + module version + resolved values (CUE text) +
// manifest digest, as "change-sha1-<8hex>". Values are the resolved values,
// never file paths, so the same inputs on any machine give the same ID.
func ChangeID(modulePath, moduleVersion, values, manifestDigest string) string {
	h := sha1.New()
	h.Write([]byte(modulePath))
	h.Write([]byte(moduleVersion))
	h.Write([]byte(values))
	h.Write([]byte(manifestDigest))
	return "change-sha1-" + hex.EncodeToString(h.Sum(nil))[:8]
}
