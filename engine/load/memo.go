package load

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// Memo keeps the deployments one command loaded, by directory and load
// options, so the renders of one selection share a load: an apply
// evaluates its releases' identities first (to skip what did not move) and
// renders them after, and loading twice cost a quarter of that render on a
// 1 000-object release. Only the command that made a Memo uses it; a
// Deployment, and so a Memo's, is for one goroutine at a time.
type Memo struct {
	mu   sync.Mutex
	byID map[string]*Deployment
}

// NewMemo starts an empty memo.
func NewMemo() *Memo { return &Memo{byID: map[string]*Deployment{}} }

// LoadWith is the package's LoadWith through m: the deployment loaded
// with the same directory and options before, or a new load remembered.
// A load served from memory records the files the first one read into
// opts.Reads, as a load of the same files would. A nil Memo loads, and so
// does a load with Options.Edit (it is not the deployment as written).
func (m *Memo) LoadWith(ctx context.Context, dir string, opts Options) (*Deployment, error) {
	if m == nil || opts.Edit != nil {
		return LoadWith(ctx, dir, opts)
	}
	id := memoID(dir, opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.byID[id]; ok {
		if opts.Reads != nil && d.parsed != nil {
			if err := d.parsed.record(opts.Reads); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	d, err := LoadWith(ctx, dir, opts)
	if err != nil {
		return nil, err
	}
	m.byID[id] = d
	return d, nil
}

// Holds reports whether m has the deployment dir loaded with opts (a nil
// Memo holds none).
func (m *Memo) Holds(dir string, opts Options) bool {
	if m == nil || opts.Edit != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.byID[memoID(dir, opts)]
	return ok
}

// memoID names a load by everything that changes what it evaluates.
func memoID(dir string, opts Options) string {
	h := sha256.New()
	h.Write([]byte(dir + "\x00" + strconv.FormatBool(opts.RelaxedClosedness)))
	for _, files := range []map[string][]byte{opts.Overlay, opts.Pruned} {
		h.Write([]byte{0xff})
		for _, name := range slices.Sorted(maps.Keys(files)) {
			h.Write([]byte(name + "\x00" + strconv.Itoa(len(files[name])) + "\x00"))
			h.Write(files[name])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
