package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/manifest"
)

// transforms keeps, in the one cache, what each component of a release
// transformed into, so a render whose inputs moved for a tenth of its
// components transforms a tenth of them. An entry is keyed by everything a
// transform reads: the component as data (spec and metadata, as the
// transformers read them), the resources and traits it declares (what the
// transformers are matched by), the release's context, the transformers
// of the environment's providers, and the running executable's build ID —
// which covers the engine and the catalog embedded in it. So it is used
// only when every transformer comes from that embedded catalog (a
// provider written in the deployment could read anything); never for a
// release with secret values, and a component that renders a Secret is
// never stored (the one cache's rule: no Secret data on disk). An entry is
// verified on read by the cache's seal (keyed with OPM_CACHE_KEY when
// set), and with verify every hit is transformed anyway and compared: a
// hit that differs is an error, never an answer.
type transforms struct {
	c      *cache.Cache
	verify bool
	prefix []byte
	// byFQN finds the transformer an entry names.
	byFQN map[string]transformer
}

// cacheUse is how a render uses the transform cache: which cache (nil:
// none), whether hits are verified, and what counts the work (tests).
type cacheUse struct {
	cache  *cache.Cache
	verify bool
	stats  *transformStats
}

// newTransforms is the transform cache for one release's render, or nil
// when it cannot be used (see transforms).
func newTransforms(use cacheUse, ts []transformer, release releaseMeta, contexts ...any) *transforms {
	if use.cache == nil {
		return nil
	}
	id, err := buildinfo.BuildID()
	if err != nil {
		return nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "opm-transform-v1\x00%s\x00%s\x00%s\x00", id, release.name, release.namespace)
	byFQN := make(map[string]transformer, len(ts))
	for _, t := range ts {
		if !t.embedded() {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%s\x00", t.provider, t.fqn)
		byFQN[t.fqn] = t
	}
	for _, c := range contexts {
		b, err := json.Marshal(c)
		if err != nil {
			return nil
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return &transforms{c: use.cache, verify: use.verify, prefix: h.Sum(nil), byFQN: byFQN}
}

// key is the entry of one component: its data (spec, metadata) and what
// it declares.
func (t *transforms) key(data []byte, comp component) string {
	h := sha256.New()
	h.Write(t.prefix)
	for _, list := range [][]string{comp.resources, comp.traits} {
		for _, s := range slices.Sorted(slices.Values(list)) {
			fmt.Fprintf(h, "%s\x00", s)
		}
		h.Write([]byte{1})
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// transformed is one object of an entry and the transformer that made it.
type transformed struct {
	Transformer string          `json:"t"`
	Object      json.RawMessage `json:"o"`
}

// get returns the objects an entry holds, each with its transformer.
func (t *transforms) get(key string) ([]transformed, bool) {
	b, ok := t.c.Get(cache.Transform, key)
	if !ok {
		return nil, false
	}
	var out []transformed
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, false
	}
	for _, o := range out {
		if _, ok := t.byFQN[o.Transformer]; !ok {
			return nil, false
		}
	}
	return out, true
}

// put stores what a component transformed into (the caller never passes
// a Secret); it reports whether it did.
func (t *transforms) put(key string, objs []transformed) bool {
	b, err := json.Marshal(objs)
	if err != nil {
		return false
	}
	return t.c.Put(cache.Transform, key, b) == nil // a cache that cannot be written is no cache
}

// transformStats counts what a render transformed and stored, and how
// often it shared components out (share.go) and rendered them again whole,
// for tests; a nil one counts nothing.
type transformStats struct {
	transformed atomic.Int64
	// shared and whole count releases whose components were shared out and
	// those rendered again on one goroutine after a share failed;
	// standIns the stand-in renders shared out.
	shared, whole, standIns atomic.Int64
	// cut counts renders made from a load with the module's components
	// cut away (moduleCut), uncut those that needed them and rendered
	// the deployment as written; what a render that needed them counted
	// is not kept.
	cut, uncut atomic.Int64
	// built counts the components the real render's shares built (the
	// component cache spares the others), standInsBuilt those the
	// stand-in renders built.
	built, standInsBuilt atomic.Int64
	mu                   sync.Mutex
	// builds are how many components each build of the real render's
	// shares built.
	builds  []int
	written []string
}

// add adds what from counted to s, when s is not nil.
func (s *transformStats) add(from *transformStats) {
	if s == nil {
		return
	}
	for _, c := range []func(*transformStats) *atomic.Int64{
		func(s *transformStats) *atomic.Int64 { return &s.transformed }, sharedCount, wholeCount, standInCount,
		func(s *transformStats) *atomic.Int64 { return &s.cut }, func(s *transformStats) *atomic.Int64 { return &s.uncut },
		func(s *transformStats) *atomic.Int64 { return &s.built }, func(s *transformStats) *atomic.Int64 { return &s.standInsBuilt },
	} {
		c(s).Add(c(from).Load())
	}
	s.mu.Lock()
	s.written = append(s.written, from.written...)
	s.builds = append(s.builds, from.builds...)
	s.mu.Unlock()
}

// count adds one to the counter of s that c picks, when s is not nil.
func (s *transformStats) count(c func(*transformStats) *atomic.Int64) {
	if s != nil {
		c(s).Add(1)
	}
}

func sharedCount(s *transformStats) *atomic.Int64  { return &s.shared }
func wholeCount(s *transformStats) *atomic.Int64   { return &s.whole }
func standInCount(s *transformStats) *atomic.Int64 { return &s.standIns }

func (s *transformStats) builtComponents(n int) {
	if s != nil {
		s.built.Add(int64(n))
		s.mu.Lock()
		s.builds = append(s.builds, n)
		s.mu.Unlock()
	}
}

func (s *transformStats) transform() {
	if s != nil {
		s.transformed.Add(1)
	}
}

func (s *transformStats) wrote(key string) {
	if s != nil {
		s.mu.Lock()
		s.written = append(s.written, key)
		s.mu.Unlock()
	}
}

// same reports whether a hit is what the transform gave.
func same(hit, fresh []transformed) bool {
	return slices.EqualFunc(hit, fresh, func(a, b transformed) bool {
		return a.Transformer == b.Transformer && bytes.Equal(a.Object, b.Object)
	})
}

// cachedResources are the objects of an entry, as a render returns them.
func cachedResources(objs []transformed, component string) ([]manifest.Resource, error) {
	raws := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		raws[i] = o.Object
	}
	return componentEntry{Objects: raws}.resources(component)
}
