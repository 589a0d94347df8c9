package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// sealKey is the key that seals the identifiers of releases holding secret
// data (and names that carry a secret) in everything opm prints:
// OPM_SEAL_KEY when set (a CI secret, so runs agree), otherwise this
// user's own key, created once under the user config directory, so that a
// sealed change ID `opm history` shows can be passed to `opm rollback
// --to` in a later run. "" (a random key of the run) when neither exists.
func sealKey(getenv func(string) string) string {
	if k := getenv(sealKeyEnv); k != "" {
		return k
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	k, err := machineKey(filepath.Join(dir, "opm", "seal.key"))
	if err != nil {
		return ""
	}
	return k
}

// machineKey reads the key at path, creating it first when absent: written
// to a temporary file and linked into place, so two runs that race both
// end up with the one key that won.
func machineKey(path string) (string, error) {
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
