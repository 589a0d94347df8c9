package fingerprint

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue/build"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
)

// The evaluated environments are a pure function of what their
// evaluation reads: the renderer (which embeds the catalog), the module
// file, the root package and the packages its shared declarations
// import. envKey hashes exactly those, so a cached evaluation under that
// key is the evaluation (Go's build cache: an action ID, an output,
// verified on read). A review's two sides with the same root package, and
// every later run on the same inputs, evaluate the environments once.

// envEntry is a cache entry (engine/cache, kind Environments): the
// evaluation's result. The one cache seals it (with OPM_CACHE_KEY when
// set); what it holds decides which files a fingerprint covers, never a
// security boundary (the policy is read from the directory each time).
// Positions in Fleet name files under Dir, the directory evaluated: the
// same inputs in another directory (a review's checkout) share the entry,
// and read it with their own directory's positions.
type envEntry struct {
	Key      string              `json:"key"`
	Dir      string              `json:"dir"`
	Names    []string            `json:"names"`
	Files    map[string][]string `json:"files"`
	Bad      map[string]string   `json:"bad,omitempty"`
	Fleet    []fleet.Declaration `json:"fleet"`
	FleetBad bool                `json:"fleetBad,omitempty"`
}

// envKey is the cache key of the environments' evaluation, which reads
// the root package and the packages reach leads to; "" when they cannot
// be hashed (then nothing is cached).
func (t *Tree) envKey(reach []*build.Instance) string {
	inputs := []Input{textInput("renderer", "opm", t.renderer)}
	inputs = append(inputs, t.base...)
	for _, inst := range load.Closure(reach...) {
		files, err := t.pkg(inst)
		if err != nil {
			return ""
		}
		inputs = append(inputs, files...)
	}
	return strings.TrimPrefix(Sum(inputs), Prefix)
}

// UseCache keeps evaluated environments in c; nil keeps them in memory
// only.
func (t *Tree) UseCache(c *cache.Cache) { t.cache = c }

func (t *Tree) cachedEnvironments(key string) (*environments, bool) {
	b, ok := t.cache.Get(cache.Environments, key)
	if !ok {
		return nil, false
	}
	var e envEntry
	if json.Unmarshal(b, &e) != nil || e.Key != key {
		t.cache.Forget(cache.Environments, key)
		return nil, false
	}
	out := &environments{names: e.Names, files: e.Files, bad: map[string]error{}, fleetBad: e.FleetBad}
	for _, d := range e.Fleet {
		d.Pos, d.WavePos = rebase(d.Pos, e.Dir, t.dir), rebase(d.WavePos, e.Dir, t.dir)
		out.fleet = append(out.fleet, d)
	}
	if out.files == nil {
		out.files = map[string][]string{}
	}
	for name, why := range e.Bad {
		out.bad[name] = fmt.Errorf("%s: %w", why, ErrUnsure)
	}
	return out, true
}

// storeEnvironments writes e under key, atomically; an evaluation that
// failed as a whole is not cached (it is retried, and reported by the
// render).
func (t *Tree) storeEnvironments(key string, e *environments) {
	if t.cache == nil || key == "" || e.err != nil {
		return
	}
	entry := envEntry{Key: key, Dir: t.dir, Names: slices.Clone(e.names), Files: e.files, Bad: map[string]string{},
		Fleet: e.fleet, FleetBad: e.fleetBad}
	for name, err := range e.bad {
		entry.Bad[name] = strings.TrimSuffix(err.Error(), ": "+ErrUnsure.Error())
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return
	}
	_ = t.cache.Put(cache.Environments, key, b) // no cache is a slower run, not a failure
}

// rebase is pos (file:line:col) with a file under from named under to.
func rebase(pos, from, to string) string {
	if from == to || !strings.HasPrefix(pos, from+string(filepath.Separator)) {
		return pos
	}
	return to + pos[len(from):]
}
