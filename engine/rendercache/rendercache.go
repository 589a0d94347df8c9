// Package rendercache keeps release renders by input fingerprint
// (engine/fingerprint), so a render whose inputs were rendered before —
// the base side of a pull request, which the merge to main already
// rendered — is read instead of evaluated.
//
// Its entries are the one cache's (engine/cache: one format, one seal,
// keyed with OPM_CACHE_KEY when set, one trim); this package is their
// codec. A read is checked beyond the seal: the fingerprint it was stored
// under is in its body, and its objects must hash to the manifest digest
// it records.
//
// A fingerprint covers the renderer's build ID, so renders of another opm
// are never returned. Releases that hold secret data (their Secrets'
// data, values from SOPS files) are never stored: the cache is plain
// files, and a secret must not reach disk; they are always rendered.
package rendercache

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// Cache is the renders of the one cache. Nil is disabled: every Get
// misses and Put stores nothing.
type Cache struct{ c *cache.Cache }

// New returns the renders of c; nil when c is nil.
func New(c *cache.Cache) *Cache {
	if c == nil {
		return nil
	}
	return &Cache{c: c}
}

// Open is New of cache.Open(dir, max, key).
func Open(dir string, max int64, key []byte) *Cache { return New(cache.Open(dir, max, key)) }

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

// Get returns the render stored under fingerprint fp and what it cost,
// or ok false: not stored, or an entry that does not check out (which is
// removed).
func (c *Cache) Get(fp string) (rel *render.Release, cost time.Duration, ok bool) {
	e, ok := c.entry(fp)
	if !ok {
		return nil, 0, false
	}
	rel, err := e.release()
	if err != nil {
		c.c.Forget(cache.Render, fp)
		return nil, 0, false
	}
	return rel, time.Duration(e.Seconds * float64(time.Second)), true
}

// Cost returns what the render stored under fp cost, without decoding
// its objects; ok false when none is stored.
func (c *Cache) Cost(fp string) (time.Duration, bool) {
	e, ok := c.entry(fp)
	if !ok {
		return 0, false
	}
	return time.Duration(e.Seconds * float64(time.Second)), true
}

// entry reads and decodes the entry of fp.
func (c *Cache) entry(fp string) (*entry, bool) {
	if c == nil || fp == "" {
		return nil, false
	}
	body, ok := c.c.Get(cache.Render, fp)
	if !ok {
		return nil, false
	}
	e, err := decode(body)
	if err != nil || e.Fingerprint != fp {
		c.c.Forget(cache.Render, fp)
		return nil, false
	}
	return e, true
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
	return c.c.Put(cache.Render, fp, body)
}

// decode decodes an entry's body.
func decode(body []byte) (*entry, error) {
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

// Trim trims the one cache the renders are kept in (cache.Trim).
func (c *Cache) Trim() error {
	if c == nil {
		return nil
	}
	return c.c.Trim()
}
