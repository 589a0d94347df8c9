package cachefile

import (
	"os"
	"path/filepath"
	"testing"
)

// An entry is written whole, replaces an older one, and leaves no
// temporary file behind.
func TestWriteIsWholeAndLeavesNothingElse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	for _, content := range []string{"first", "second"} {
		if err := Write(dir, "entry.json", []byte(content)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "entry.json"))
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	names, err := os.ReadDir(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("the cache holds %v (%v), want the one entry", names, err)
	}
}

// A directory that cannot be created is an error, not a panic or a
// half-written entry.
func TestWriteIntoAFileFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(file, "cache"), "entry", []byte("x")); err == nil {
		t.Fatal("writing under a regular file succeeded")
	}
}
