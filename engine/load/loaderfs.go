package load

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// loaderFS is the file system one cue/load call reads (load.Config.FS):
// the host's, rooted at "/", with overlay files (absolute path → content)
// on top, as load.Config.Overlay would place them.
//
// It exists to list each directory once per load. cue/load lists every
// parent directory of every package it imports, up to the module root
// (a package may have files in its parents), and each listing reads the
// whole directory: a deployment whose module packages sit side by side
// under one directory (mods/m0001 … mods/m1000) listed that directory
// twice per import, so a load cost the square of the repository's size.
// A load sees a directory as it was when first listed, as cue/load's own
// parse cache sees a file.
type loaderFS struct {
	files map[string][]byte // overlay, by slash path without the leading "/"
	// dirs lists, for each directory that holds overlay files or
	// directories, the names of those children: they exist even where
	// the host has no such directory.
	dirs map[string]map[string]bool

	mu     sync.Mutex
	listed map[string]listing
	// host serves the host's regular files: cue/load opens a file several
	// times in one load (to find its package, to parse it), and the other
	// readers of a command read it again; host reads each from disk once.
	host *Files
}

type hostFile struct {
	b    []byte
	info fs.FileInfo
	err  error
}

type listing struct {
	entries []fs.DirEntry
	err     error
}

func newLoaderFS(overlay map[string][]byte, host *Files) *loaderFS {
	f := &loaderFS{files: map[string][]byte{}, dirs: map[string]map[string]bool{}, listed: map[string]listing{}, host: host}
	for abs, b := range overlay {
		name := strings.TrimPrefix(path.Clean(abs), "/")
		f.files[name] = b
		// Up to the root, or to a directory already recorded (and so
		// its parents): a base read from git overlays every file.
		for child := name; child != "."; child = path.Dir(child) {
			dir := path.Dir(child)
			_, known := f.dirs[dir]
			if !known {
				f.dirs[dir] = map[string]bool{}
			}
			f.dirs[dir][path.Base(child)] = true
			if known {
				break
			}
		}
	}
	return f
}

func (f *loaderFS) hostPath(name string) string { return "/" + name }

// Open implements fs.FS.
func (f *loaderFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := f.files[name]; ok {
		return &memFile{Reader: bytes.NewReader(b), info: memInfo{name: path.Base(name), size: int64(len(b))}}, nil
	}
	if _, ok := f.dirs[name]; ok {
		return &dirFile{fsys: f, name: name}, nil
	}
	if h, ok := f.hostFile(name); ok {
		if h.err != nil {
			return nil, h.err
		}
		return &memFile{Reader: bytes.NewReader(h.b), info: h.info}, nil
	}
	file, err := os.Open(f.hostPath(name))
	if err != nil {
		return nil, err
	}
	return file, nil
}

// hostFile is the host's file name as read, when it is a regular file; ok
// is false for anything else (a directory is opened as it is).
func (f *loaderFS) hostFile(name string) (hostFile, bool) {
	return f.host.file(f.hostPath(name))
}

// Stat implements fs.StatFS.
func (f *loaderFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := f.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(b))}, nil
	}
	if _, ok := f.dirs[name]; ok {
		if st, err := os.Stat(f.hostPath(name)); err == nil && st.IsDir() {
			return st, nil
		}
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	return os.Stat(f.hostPath(name))
}

// ReadFile implements fs.ReadFileFS.
func (f *loaderFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := f.files[name]; ok {
		return slices.Clone(b), nil
	}
	if h, ok := f.hostFile(name); ok {
		return slices.Clone(h.b), h.err
	}
	return os.ReadFile(f.hostPath(name))
}

// ReadDir implements fs.ReadDirFS: the host's entries, overlay entries
// replacing or adding to them, sorted by name; each directory listed
// from the host once.
func (f *loaderFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	f.mu.Lock()
	l, ok := f.listed[name]
	f.mu.Unlock()
	if !ok {
		l = f.list(name)
		f.mu.Lock()
		f.listed[name] = l
		f.mu.Unlock()
	}
	// Callers may sort or keep what they get: each gets its own slice.
	return slices.Clone(l.entries), l.err
}

func (f *loaderFS) list(name string) listing {
	entries, err := os.ReadDir(f.hostPath(name))
	children, overlaid := f.dirs[name]
	if err != nil {
		if !overlaid || !os.IsNotExist(err) {
			return listing{err: err}
		}
		entries = nil
	}
	if !overlaid {
		return listing{entries: entries}
	}
	byName := map[string]int{}
	for i, e := range entries {
		byName[e.Name()] = i
	}
	for c := range children {
		child := path.Join(name, c)
		var e fs.DirEntry
		if b, ok := f.files[child]; ok {
			e = fs.FileInfoToDirEntry(memInfo{name: c, size: int64(len(b))})
		} else {
			e = fs.FileInfoToDirEntry(memInfo{name: c, dir: true})
		}
		if i, ok := byName[c]; ok {
			if e.IsDir() && entries[i].IsDir() {
				continue // a directory on both: the host's entry
			}
			entries[i] = e
			continue
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return listing{entries: entries}
}

// memInfo describes an overlay file or a directory only the overlay has.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (m *memFile) Stat() (fs.FileInfo, error) { return m.info, nil }
func (m *memFile) Close() error               { return nil }

// dirFile is an opened directory the overlay has (and the host may too).
type dirFile struct {
	fsys    *loaderFS
	name    string
	entries []fs.DirEntry
	read    bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.fsys.Stat(d.name) }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: fs.ErrInvalid}
}
func (d *dirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		entries, err := d.fsys.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.entries, d.read = entries, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n]
	d.entries = d.entries[n:]
	return out, nil
}
