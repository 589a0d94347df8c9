package pipeline

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/pipeline/operation"
	"github.com/opmodel/pipeline/pipeline/snapshot"
)

// sessionKey carries a command's session in its context.
type sessionKey struct{}

// session is what one command's steps share: the host's files as first
// read (each file of the deployment read from disk once, whichever step
// reads it: the fleet, the fingerprints, the loads, the pruned roots), and
// one client and API discovery per cluster. Evaluated CUE is not shared:
// one CUE context must not be used by two goroutines, and a rollout's
// environments run side by side, so each operation keeps its own load
// memo (withLoads).
type session struct {
	connections *connections
	files       *load.Files

	mu sync.Mutex
	// trees are the working tree's directories as scanned (parsed, not
	// evaluated: a Tree may be asked from several goroutines), by
	// absolute path: the fleet, the fingerprints and explain read one.
	trees map[string]*scannedTree
}

type scannedTree struct {
	once sync.Once
	tree *fingerprint.Tree
	err  error
}

// WithSession returns ctx carrying a session for one command: every
// operation called with it (and the steps each runs) shares it. A front
// door opens one per command; ctx already carrying one is returned as it
// is.
func WithSession(ctx context.Context) context.Context {
	if sessionOf(ctx) != nil {
		return ctx
	}
	s := &session{connections: newConnections(), files: load.NewFiles(), trees: map[string]*scannedTree{}}
	return load.WithFiles(context.WithValue(ctx, sessionKey{}, s), s.files)
}

// sessionOf is ctx's session, nil outside one.
func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// worktreeTree is the working tree's directory dir as scanned, once per
// session (every call outside one scans again).
func worktreeTree(ctx context.Context, dir string) (*fingerprint.Tree, error) {
	s := sessionOf(ctx)
	abs, err := filepath.Abs(dir)
	if s == nil || err != nil {
		return snapshot.Worktree(dir).Scan(ctx, operation.OpenCache("", nil))
	}
	s.mu.Lock()
	st, ok := s.trees[abs]
	if !ok {
		st = &scannedTree{}
		s.trees[abs] = st
	}
	s.mu.Unlock()
	st.once.Do(func() { st.tree, st.err = snapshot.Worktree(dir).Scan(ctx, operation.OpenCache("", nil)) })
	return st.tree, st.err
}
