package cache

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Sealed entries hold what may carry secret data (a component's objects,
// its Secrets among them) where the cache directory can be shared or
// uploaded (actions/cache, a Dagger volume). Their body is encrypted
// (AES-256-GCM) and their file named by an HMAC of their key, both under a
// seal key that never sits in the cache directory: derived from the
// cache's key when it has one (OPM_CACHE_KEY, a secret trusted runs hold),
// else the user's own (SealKeyFile). Whoever has the directory without
// that key can neither read an entry nor confirm a guess of what it was
// computed from; a run with another key misses.

// sealKeySize is the size of a seal key file's key.
const sealKeySize = 32

// WithSealKey returns a copy of c whose sealed entries use key when c has
// no key of its own (a keyed cache derives its seal key from that key, so
// every run that holds it reads what the others wrote). Nil or an empty
// key: no sealed entries.
func (c *Cache) WithSealKey(key []byte) *Cache {
	key = slices.Clone(key)
	return c.withSealKey(func() []byte { return key })
}

// WithSealKeyFile is WithSealKey with the key kept in path (SealKeyFile),
// read — or made — only when a sealed entry is first used, so a command
// that seals nothing leaves no key behind. A key file that cannot be read
// or made: no sealed entries.
func (c *Cache) WithSealKeyFile(path string) *Cache {
	return c.withSealKey(sync.OnceValue(func() []byte {
		key, err := SealKeyFile(path)
		if err != nil {
			return nil
		}
		return key
	}))
}

func (c *Cache) withSealKey(key func() []byte) *Cache {
	if c == nil {
		return nil
	}
	out := *c
	out.sealKey = key
	return &out
}

// sealing is the key sealed entries use; nil when there is none.
func (c *Cache) sealing() []byte {
	if c == nil {
		return nil
	}
	if len(c.key) > 0 {
		m := hmac.New(sha256.New, c.key)
		m.Write([]byte("opm-cache-sealed-entries-v1"))
		return m.Sum(nil)
	}
	if c.sealKey == nil {
		return nil
	}
	if k := c.sealKey(); len(k) > 0 {
		return k
	}
	return nil
}

// Sealing reports whether sealed entries can be read and written.
func (c *Cache) Sealing() bool { return c.sealing() != nil }

// sealedName is the key a sealed entry is stored under: an HMAC of kind
// and key, so its file name says nothing without the seal key.
func sealedName(sk []byte, kind Kind, key string) string {
	m := hmac.New(sha256.New, sk)
	m.Write([]byte("name\x00" + string(kind) + "\x00" + key))
	return "sealed-" + hex.EncodeToString(m.Sum(nil))
}

func sealedAEAD(sk []byte) (cipher.AEAD, error) {
	m := hmac.New(sha256.New, sk)
	m.Write([]byte("aes-256-gcm"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// GetSealed returns the body of the sealed entry of kind and key; ok is
// false when there is none, there is no seal key, or it does not decrypt
// under this one (then it is removed).
func (c *Cache) GetSealed(kind Kind, key string) (body []byte, ok bool) {
	sk := c.sealing()
	if sk == nil || key == "" {
		return nil, false
	}
	n := sealedName(sk, kind, key)
	b, ok := c.Get(kind, n)
	if !ok {
		return nil, false
	}
	aead, err := sealedAEAD(sk)
	if err != nil || len(b) < aead.NonceSize() {
		c.Forget(kind, n)
		return nil, false
	}
	body, err = aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(string(kind)+"\x00"+key))
	if err != nil {
		c.Forget(kind, n)
		return nil, false
	}
	return body, true
}

// PutSealed stores body, encrypted, under kind and key; nothing without a
// seal key.
func (c *Cache) PutSealed(kind Kind, key string, body []byte) error {
	sk := c.sealing()
	if sk == nil || key == "" {
		return nil
	}
	aead, err := sealedAEAD(sk)
	if err != nil {
		return fmt.Errorf("sealing a cache entry: %w", err)
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("sealing a cache entry: %w", err)
	}
	return c.Put(kind, sealedName(sk, kind, key), aead.Seal(nonce, nonce, body, []byte(string(kind)+"\x00"+key)))
}

// SealKeyFile returns the seal key kept in path, creating it (mode 0600,
// its directory 0700) with a random key when there is none: the user's
// own key for sealed entries, kept with their other keys rather than in
// the cache directory. A file of another size, or one readable by others,
// is an error: it is never replaced.
func SealKeyFile(path string) ([]byte, error) {
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			st, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			if st.Mode().Perm()&0o077 != 0 {
				return nil, fmt.Errorf("the cache's seal key %s may be read by others (mode %v): chmod 600 it", path, st.Mode().Perm())
			}
			if len(b) != sealKeySize {
				return nil, fmt.Errorf("the cache's seal key %s holds %d bytes, not %d: remove it and opm makes another", path, len(b), sealKeySize)
			}
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		key := make([]byte, sealKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		// Written whole beside it and linked into place: a concurrent
		// opm either makes the key or reads the other's, never half of one.
		tmp, err := os.CreateTemp(filepath.Dir(path), ".seal-key-*")
		if err != nil {
			return nil, err
		}
		_, werr := tmp.Write(key)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			_ = os.Remove(tmp.Name())
			return nil, err
		}
		lerr := os.Link(tmp.Name(), path)
		_ = os.Remove(tmp.Name())
		if lerr != nil && !errors.Is(lerr, fs.ErrExist) {
			return nil, lerr
		}
		// Linked, or another run's key is there: read what is.
	}
	return nil, fmt.Errorf("the cache's seal key %s could not be read or made", path)
}
