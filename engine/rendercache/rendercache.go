// Package rendercache keeps release renders by input fingerprint
// (engine/fingerprint), so a render whose inputs were rendered before —
// the base side of a pull request, which the merge to main already
// rendered — is read instead of evaluated.
//
// It works as Go's build cache does (cmd/go/internal/cache): an entry is
// addressed by the hash of its key, written to a temporary file and
// renamed into place (engine/cachefile), so a concurrent reader sees all
// of it or nothing; it is verified on read — the SHA-256 of its body is in
// its first line, and the fingerprint it was stored under is in its body —
// so a corrupt, truncated or misplaced entry is a miss, never an error or
// a wrong answer; reading an entry refreshes its time (at most once an
// hour) and Trim evicts the least recently used entries beyond a size
// bound.
//
// A checksum only proves an entry whole. Whoever can write the directory
// (a cache volume or runner disk shared with untrusted runs) could store
// a well-formed forgery, so a cache opened with a key (OPM_CACHE_KEY, a
// secret only trusted runs hold) writes an HMAC-SHA256 of each body under
// that key instead, and reads only entries whose HMAC verifies: a forged
// entry, an unkeyed one, or one keyed otherwise is a miss. A cache opened
// without a key reads only unkeyed entries.
//
// A fingerprint covers the renderer's build ID, so renders of another opm
// are never returned. Releases that hold secret data (their Secrets'
// data, values from SOPS files) are never stored: the cache is plain
// files, and a secret must not reach disk; they are always rendered.
package rendercache

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/cachefile"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// header starts every entry of an unkeyed cache, before the body's
// SHA-256; keyedHeader every entry of a keyed one, before its HMAC.
const (
	header      = "opm-render-cache-v1 "
	keyedHeader = "opm-render-cache-v1-hmac-sha256 "
)

// DefaultMaxBytes bounds the cache when no bound is given: 1 GiB, about
// 50 000 renders of the generated monorepo's releases.
const DefaultMaxBytes = 1 << 30

// touchAfter is how stale an entry's time may be before a read refreshes
// it: a write per read would cost more than the LRU order is worth.
const touchAfter = time.Hour

// Cache is a directory of renders. The zero value and nil are disabled:
// every Get misses and Put stores nothing.
type Cache struct {
	dir string
	max int64
	key []byte
}

// Open returns the cache in dir, bounded to max bytes (DefaultMaxBytes
// when max <= 0); nil when dir is empty. With a key, entries are
// authenticated with it (see the package comment).
func Open(dir string, max int64, key []byte) *Cache {
	if dir == "" {
		return nil
	}
	if max <= 0 {
		max = DefaultMaxBytes
	}
	return &Cache{dir: dir, max: max, key: slices.Clone(key)}
}

// entry is what a file holds.
type entry struct {
	Fingerprint string `json:"fingerprint"`
	// Seconds is what the render cost, for balancing shards.
	Seconds        float64           `json:"seconds"`
	Key            string            `json:"key"`
	Name           string            `json:"name"`
	Namespace      string            `json:"namespace"`
	Environment    string            `json:"environment,omitempty"`
	ReleaseID      string            `json:"releaseId"`
	Module         render.Module     `json:"module"`
	Values         json.RawMessage   `json:"values"`
	ValuesText     string            `json:"valuesText"`
	ManifestDigest string            `json:"manifestDigest"`
	ChangeID       string            `json:"changeId"`
	Warnings       []string          `json:"warnings,omitempty"`
	Objects        []json.RawMessage `json:"objects"`
	Components     []string          `json:"components"`
}

// path is where the entry for fingerprint fp lives: the hex SHA-256 of
// fp, under a directory of its first two characters.
func (c *Cache) path(fp string) string {
	sum := sha256.Sum256([]byte(fp))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(c.dir, h[:2], h)
}

// Get returns the render stored under fingerprint fp and what it cost,
// or ok false: not stored, or an entry that does not verify (which is
// removed).
func (c *Cache) Get(fp string) (rel *render.Release, cost time.Duration, ok bool) {
	if c == nil || fp == "" {
		return nil, 0, false
	}
	p := c.path(fp)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, 0, false
	}
	e, err := c.decode(b)
	if err != nil || e.Fingerprint != fp {
		_ = os.Remove(p)
		return nil, 0, false
	}
	rel, err = e.release()
	if err != nil {
		_ = os.Remove(p)
		return nil, 0, false
	}
	if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > touchAfter {
		now := time.Now()
		_ = os.Chtimes(p, now, now)
	}
	return rel, time.Duration(e.Seconds * float64(time.Second)), true
}

// Cost returns what the render stored under fp cost, without decoding
// its objects; ok false when none is stored.
func (c *Cache) Cost(fp string) (time.Duration, bool) {
	if c == nil || fp == "" {
		return 0, false
	}
	b, err := os.ReadFile(c.path(fp))
	if err != nil {
		return 0, false
	}
	e, err := c.decode(b)
	if err != nil || e.Fingerprint != fp {
		return 0, false
	}
	return time.Duration(e.Seconds * float64(time.Second)), true
}

// Cacheable reports whether rel may be stored: not when it holds secret
// data, which must not reach disk.
func Cacheable(rel *render.Release) bool {
	return rel != nil && !rel.Sensitive() && len(rel.SecretFields) == 0
}

// Put stores rel under fingerprint fp with what it cost. A release that
// is not Cacheable is not stored.
func (c *Cache) Put(fp string, rel *render.Release, cost time.Duration) error {
	if c == nil || fp == "" || !Cacheable(rel) {
		return nil
	}
	e := entry{
		Fingerprint: fp, Seconds: cost.Seconds(), Key: rel.Key, Name: rel.Name, Namespace: rel.Namespace, Environment: rel.Environment,
		ReleaseID: rel.ReleaseID, Module: rel.Module, Values: rel.Values, ValuesText: rel.ValuesText,
		ManifestDigest: rel.ManifestDigest, ChangeID: rel.ChangeID, Warnings: rel.Warnings,
	}
	for _, r := range rel.Resources {
		b, err := r.Object.MarshalJSON()
		if err != nil {
			return fmt.Errorf("caching the render of %s: %w", rel.Name, err)
		}
		e.Objects = append(e.Objects, b)
		e.Components = append(e.Components, r.Component)
	}
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("caching the render of %s: %w", rel.Name, err)
	}
	b := append([]byte(c.seal(body)+"\n"), body...)
	p := c.path(fp)
	return cachefile.Write(filepath.Dir(p), filepath.Base(p), b)
}

// seal is the first line of an entry with this body: its SHA-256, or in
// a keyed cache its HMAC.
func (c *Cache) seal(body []byte) string {
	if len(c.key) == 0 {
		sum := sha256.Sum256(body)
		return header + hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return keyedHeader + hex.EncodeToString(m.Sum(nil))
}

// decode verifies an entry's first line and decodes its body.
func (c *Cache) decode(b []byte) (*entry, error) {
	line, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, errors.New("not a render cache entry")
	}
	if !hmac.Equal(line, []byte(c.seal(body))) {
		return nil, errors.New("checksum or authentication mismatch")
	}
	var e entry
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, err
	}
	if len(e.Objects) != len(e.Components) {
		return nil, errors.New("objects and components differ in number")
	}
	return &e, nil
}

// release rebuilds the render an entry stored.
func (e *entry) release() (*render.Release, error) {
	rel := &render.Release{
		Key: e.Key, Name: e.Name, Namespace: e.Namespace, Environment: e.Environment, ReleaseID: e.ReleaseID, Module: e.Module,
		Values: e.Values, ValuesText: e.ValuesText, ManifestDigest: e.ManifestDigest, ChangeID: e.ChangeID, Warnings: e.Warnings,
		Fingerprint: e.Fingerprint, Resources: make([]manifest.Resource, 0, len(e.Objects)),
	}
	for i, b := range e.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, err
		}
		rel.Resources = append(rel.Resources, manifest.Resource{Object: u, Component: e.Components[i]})
	}
	// The digest is recomputed from what was read: an entry whose objects
	// do not hash to the digest it records is not trusted.
	if d, err := manifest.Digest(rel.Resources); err != nil || d != rel.ManifestDigest {
		return nil, errors.New("the objects do not hash to the recorded digest")
	}
	return rel, nil
}

// Trim evicts the least recently used entries until the cache holds at
// most nine tenths of its bound, when it holds more than the bound.
// Temporary files of writers that died are removed once an hour old.
func (c *Cache) Trim() error {
	if c == nil {
		return nil
	}
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(p)
			}
			return nil
		}
		files = append(files, file{p, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if err != nil {
		return fmt.Errorf("trimming the render cache %s: %w", c.dir, err)
	}
	if total <= c.max {
		return nil
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if total <= c.max*9/10 {
			break
		}
		if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
	return nil
}
