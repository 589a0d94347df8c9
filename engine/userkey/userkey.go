// Package userkey keeps the user's own key: made once in opm's directory
// under the user configuration directory, beside the user's other keys,
// and the same for every run after. What opm prints seals identifiers with
// it when no OPM_SEAL_KEY is given (cmd/opm), and the one cache derives
// the key of its sealed entries from it when no OPM_CACHE_KEY is
// (pipeline/operation).
package userkey

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Path is where the user's key is kept; "" when the user has no
// configuration directory.
func Path() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "opm", "seal.key")
}

// Read reads the key at path, creating it first when absent: written to a
// temporary file (mode 0600, its directory 0700) and linked into place, so
// two runs that race both end up with the one key that won.
func Read(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seal.key-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
