package load

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"sync"
)

// Files is the host's files as one command reads them: each regular file
// is read from disk once, by whichever reader first needs it (CUE's
// loader, the fingerprint, the pruned root, an error's source line), and
// served from memory to the others. Every read checks the file with a
// stat and reads it again when its size or modification time moved, as
// Go's build cache verifies what it serves, so a command never works on
// a file older than the disk's. Safe for concurrent use.
type Files struct {
	mu    sync.Mutex
	read  map[string]hostFile
	reads map[string]int // disk reads by file, for Reads
}

// NewFiles is an empty Files: a front door opens one per command
// (pipeline.WithSession).
func NewFiles() *Files { return &Files{read: map[string]hostFile{}, reads: map[string]int{}} }

type filesKey struct{}

// WithFiles returns ctx carrying f, which every load under it reads
// through.
func WithFiles(ctx context.Context, f *Files) context.Context {
	return context.WithValue(ctx, filesKey{}, f)
}

// FilesOf returns the Files ctx carries, or a new one that shares nothing
// (a caller outside a session reads as before: once per load).
func FilesOf(ctx context.Context) *Files {
	if f, ok := ctx.Value(filesKey{}).(*Files); ok && f != nil {
		return f
	}
	return NewFiles()
}

// file returns the regular file at the absolute path name as read; ok
// is false for anything that is not a regular file (a directory is opened
// as it is).
func (f *Files) file(name string) (hostFile, bool) {
	st, err := os.Stat(name)
	if err != nil || !st.Mode().IsRegular() {
		return hostFile{}, false
	}
	f.mu.Lock()
	h, ok := f.read[name]
	f.mu.Unlock()
	if ok && h.info.Size() == st.Size() && h.info.ModTime().Equal(st.ModTime()) {
		return h, true
	}
	h = hostFile{info: st}
	h.b, h.err = os.ReadFile(name)
	f.mu.Lock()
	f.read[name] = h
	f.reads[name]++
	f.mu.Unlock()
	return h, true
}

// Reads says how often each file was read from disk: what a command's
// cost in reads is checked against (once each, unless it changed).
func (f *Files) Reads() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.reads)
}

// ReadFile returns the content of the host file name. The bytes are
// shared: callers must not modify them.
func (f *Files) ReadFile(name string) ([]byte, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return os.ReadFile(name)
	}
	if h, ok := f.file(abs); ok {
		return h.b, h.err
	}
	return os.ReadFile(name)
}
