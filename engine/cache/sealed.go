package cache

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
)

// Sealed entries hold what may carry secret data (a component's objects,
// its Secrets among them) where the cache directory can be shared or
// uploaded (actions/cache, a Dagger volume). Their body is encrypted
// (AES-256-GCM) and their file named by an HMAC of their key, both under a
// seal key that never sits in the cache directory: derived from the
// cache's key when it has one (OPM_CACHE_KEY, a secret trusted runs hold),
// else from the user's own (WithSealKeyFrom). Whoever has the directory without
// that key can neither read an entry nor confirm a guess of what it was
// computed from; a run with another key misses.

// WithSealKey returns a copy of c whose sealed entries use key when c has
// no key of its own (a keyed cache derives its seal key from that key, so
// every run that holds it reads what the others wrote). Nil or an empty
// key: no sealed entries.
func (c *Cache) WithSealKey(key []byte) *Cache {
	key = slices.Clone(key)
	return c.withSealKey(func() []byte { return key })
}

// WithSealKeyFrom is WithSealKey with a key read only when a sealed entry
// is first used (read is called at most once), so a command that seals
// nothing reads, or makes, no key. Nil from read: no sealed entries.
func (c *Cache) WithSealKeyFrom(read func() []byte) *Cache {
	return c.withSealKey(sync.OnceValue(read))
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
	base := c.key
	if len(base) == 0 && c.sealKey != nil {
		base = c.sealKey()
	}
	if len(base) == 0 {
		return nil
	}
	// Derived, never the key itself: the user's key also seals what opm
	// prints, and the cache's key authenticates every entry.
	m := hmac.New(sha256.New, base)
	m.Write([]byte("opm-cache-sealed-entries-v1"))
	return m.Sum(nil)
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
