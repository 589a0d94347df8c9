// Package cache is opm's one local cache: renders, evaluated environments
// and release identities are entries of one directory, with one format,
// one integrity check, one trust model and one trim policy, the way Go's
// build cache (cmd/go/internal/cache) is one.
//
// An entry is addressed by its kind and its key (an input fingerprint):
// its file is the SHA-256 of both, under a directory of the hash's first
// two characters. Its first line seals the rest: the SHA-256 of kind, key
// and body, or, in a cache opened with a key (OPM_CACHE_KEY, a secret only
// trusted runs hold), an HMAC-SHA256 of them under that key. A read
// returns only a body whose seal verifies and names the kind and key asked
// for, so a corrupt, truncated or misplaced entry is a miss (and removed);
// a keyed cache reads only entries written with its key, of every kind,
// and an unkeyed one only unkeyed entries.
//
// A checksum proves an entry whole, not who wrote it: whoever can write an
// unkeyed cache directory can store a well-formed forgery. So nothing that
// decides a security boundary (the identity a release acts as, where it may
// write) is ever taken from an entry: callers store work whose result they
// check, or that only a keyed writer could have stored.
//
// Writes go to a temporary file renamed into place, so a concurrent
// reader sees a whole entry or none; they go through an os.Root of the
// cache directory and refuse a symlink anywhere under it, so an entry is
// never written outside the directory, whatever another writer of it
// planted. Reading an entry refreshes its time (at most once an hour);
// Trim, at most once an hour, evicts the least recently used entries
// beyond a size bound.
package cache

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what an entry holds; the same key under two kinds is two entries.
type Kind string

// The kinds opm stores.
const (
	Render       Kind = "render"
	Environments Kind = "environments"
	Identity     Kind = "identity"
	// Transform holds what one component of a release transformed into
	// (engine/render), so a render transforms only what changed.
	Transform Kind = "transform"
	// Component holds what one component of a release rendered to, keyed
	// from its syntax and the values it reads; sealed (sealed.go), as it
	// may hold a Secret's data (engine/render).
	Component Kind = "component"
)

// Format of the first line: magic, kind, the seal's algorithm, its hex.
const (
	magic       = "opm-cache-v2"
	unkeyedAlgo = "sha256"
	keyedAlgo   = "hmac-sha256"
)

// DefaultMaxBytes bounds the cache when no bound is given: 1 GiB, about
// 50 000 renders of the generated monorepo's releases.
const DefaultMaxBytes = 1 << 30

// touchAfter is how stale an entry's time may be before a read refreshes
// it, and trimEvery how often Trim walks the directory: a write per read,
// or a walk per command, would cost more than the LRU order is worth.
const (
	touchAfter = time.Hour
	trimEvery  = time.Hour
)

// legacy are the directories of the three caches opm kept before this
// one: Trim removes them.
var legacy = []string{"renders", "environments", "identities"}

// trimStamp is the file whose content is when the cache was last trimmed.
const trimStamp = "trim.txt"

// Cache is a directory of entries. Nil is a disabled cache: every Get
// misses and Put stores nothing.
type Cache struct {
	dir string
	max int64
	key []byte
	// sealKey gives the unkeyed cache's key for sealed entries
	// (sealed.go); nil: none.
	sealKey func() []byte
}

// Open returns the cache in dir, bounded to max bytes (DefaultMaxBytes when
// max <= 0), its entries sealed with key when key is not empty; nil when
// dir is empty. Nothing is created until the first Put.
func Open(dir string, max int64, key []byte) *Cache {
	if dir == "" {
		return nil
	}
	if max <= 0 {
		max = DefaultMaxBytes
	}
	return &Cache{dir: dir, max: max, key: slices.Clone(key)}
}

// Dir is the directory of the cache, "" for a disabled one.
func (c *Cache) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Keyed reports whether entries are sealed with a key.
func (c *Cache) Keyed() bool { return c != nil && len(c.key) > 0 }

// name is the entry's file, relative to the cache directory.
func name(kind Kind, key string) string {
	sum := sha256.Sum256([]byte(string(kind) + "\x00" + key))
	h := hex.EncodeToString(sum[:])
	return path.Join(h[:2], h)
}

// seal is the first line of the entry of kind and key holding body.
func (c *Cache) seal(kind Kind, key string, body []byte) []byte {
	algo := unkeyedAlgo
	var m = sha256.New()
	if len(c.key) > 0 {
		algo, m = keyedAlgo, hmac.New(sha256.New, c.key)
	}
	m.Write([]byte(string(kind) + "\x00" + key + "\x00"))
	m.Write(body)
	return fmt.Appendf(nil, "%s %s %s %s", magic, kind, algo, hex.EncodeToString(m.Sum(nil)))
}

// Get returns the body stored under kind and key; ok is false when there
// is none, or the entry does not verify (then it is removed).
func (c *Cache) Get(kind Kind, key string) (body []byte, ok bool) {
	if c == nil || key == "" {
		return nil, false
	}
	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return nil, false
	}
	defer root.Close()
	n := name(kind, key)
	if !realFile(root, n) {
		return nil, false
	}
	b, err := root.ReadFile(n)
	if err != nil {
		return nil, false
	}
	line, body, found := bytes.Cut(b, []byte("\n"))
	if !found || !hmac.Equal(line, c.seal(kind, key, body)) {
		_ = root.Remove(n)
		return nil, false
	}
	if st, err := root.Lstat(n); err == nil && time.Since(st.ModTime()) > touchAfter {
		now := time.Now()
		_ = root.Chtimes(n, now, now)
	}
	return body, true
}

// Forget removes the entry of kind and key: its body verified but does
// not decode, or no longer checks out.
func (c *Cache) Forget(kind Kind, key string) {
	if c == nil || key == "" {
		return
	}
	if root, err := os.OpenRoot(c.dir); err == nil {
		_ = root.Remove(name(kind, key))
		_ = root.Close()
	}
}

// Put stores body under kind and key, whole or not at all.
func (c *Cache) Put(kind Kind, key string, body []byte) error {
	if c == nil || key == "" {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return fmt.Errorf("opening the cache directory: %w", err)
	}
	defer root.Close()
	n := name(kind, key)
	sub := path.Dir(n)
	switch st, err := root.Lstat(sub); {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Mkdir(sub, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("writing a cache entry: %w", err)
		}
		if !realDir(root, sub) {
			return fmt.Errorf("writing a cache entry: %s/%s is not a directory", c.dir, sub)
		}
	case err != nil:
		return fmt.Errorf("writing a cache entry: %w", err)
	case !st.IsDir():
		// A symlink (or a file) planted where a directory of entries
		// goes: never followed, never written through.
		return fmt.Errorf("writing a cache entry: %s/%s is not a directory (a symlink is never followed)", c.dir, sub)
	}
	return writeAtomic(root, n, append(append(c.seal(kind, key, body), '\n'), body...))
}

// writeAtomic writes b to a new temporary file beside n, then renames it
// over n: a reader sees the old entry, or the new one whole.
func writeAtomic(root *os.Root, n string, b []byte) error {
	var tmp string
	var f *os.File
	for i := 0; ; i++ {
		tmp = path.Join(path.Dir(n), ".tmp-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(i))
		var err error
		// O_EXCL: a name planted by someone else (a symlink included) is
		// never opened; another is tried.
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i >= 10 {
			return fmt.Errorf("writing a cache entry: %w", err)
		}
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil && cerr == nil {
		if werr = root.Rename(tmp, n); werr == nil {
			return nil
		}
	}
	_ = root.Remove(tmp)
	if werr == nil {
		werr = cerr
	}
	return fmt.Errorf("writing a cache entry: %w", werr)
}

// realDir reports whether n is a directory, not a symlink to one.
func realDir(root *os.Root, n string) bool {
	st, err := root.Lstat(n)
	return err == nil && st.IsDir()
}

// realFile reports whether n is a regular file under a real directory.
func realFile(root *os.Root, n string) bool {
	if !realDir(root, path.Dir(n)) {
		return false
	}
	st, err := root.Lstat(n)
	return err == nil && st.Mode().IsRegular()
}

// Trim evicts the least recently used entries until the cache holds at
// most nine tenths of its bound, when it holds more than the bound, and
// removes temporary files of writers that died (an hour old). It walks
// the directory at most once per trimEvery: a command's cost follows
// what it does, not the size of the cache.
func (c *Cache) Trim() error {
	if c == nil {
		return nil
	}
	root, err := os.OpenRoot(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trimming the cache %s: %w", c.dir, err)
	}
	defer root.Close()
	now := time.Now()
	if b, err := root.ReadFile(trimStamp); err == nil {
		if last, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && now.Sub(time.Unix(last, 0)) < trimEvery {
			return nil
		}
	}
	_ = writeAtomic(root, trimStamp, []byte(strconv.FormatInt(now.Unix(), 10)+"\n"))
	type file struct {
		name string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil // removed meanwhile, or unreadable: not ours to judge
		case d.IsDir():
			if slices.Contains(legacy, p) {
				_ = root.RemoveAll(p) // an older opm's layout: never read again
				return fs.SkipDir
			}
			if p != "." && !isShard(p) {
				return fs.SkipDir // not ours
			}
			return nil
		case !d.Type().IsRegular() || p == trimStamp:
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			if now.Sub(info.ModTime()) > time.Hour {
				_ = root.Remove(p)
			}
			return nil
		}
		files = append(files, file{p, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if err != nil {
		return fmt.Errorf("trimming the cache %s: %w", c.dir, err)
	}
	if total <= c.max {
		return nil
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if total <= c.max*9/10 {
			break
		}
		if err := root.Remove(f.name); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
	return nil
}

// isShard reports whether p is a directory of entries: two hex digits.
func isShard(p string) bool {
	if len(p) != 2 {
		return false
	}
	_, err := hex.DecodeString(p)
	return err == nil
}
