package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The test binary is a Go executable too: its build ID must be what the
// go command itself reads from it.
func TestBuildIDIsGoToolBuildID(t *testing.T) {
	id, err := BuildID()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatalf("go tool buildid: %v", err)
	}
	if want := "go:" + strings.TrimSpace(string(out)); id != want {
		t.Fatalf("BuildID() = %q, go tool buildid says %q", id, want)
	}
}

// Two programs that differ only in code (same -X strings) have different
// build IDs: the renderer's identity follows its code.
func TestBuildIDFollowsCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	dir := t.TempDir()
	build := func(name, body string) string {
		src := filepath.Join(dir, name)
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/"+name+"\n\ngo 1.21\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		prog := "package main\n\nvar commit string\n\nfunc main() { println(" + body + ", commit) }\n"
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(prog), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, name+".bin")
		cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.commit=abc", "-o", bin, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return bin
	}
	a, b := build("a", `"one"`), build("b", `"two"`)
	ida, err := buildIDOf(a)
	if err != nil {
		t.Fatal(err)
	}
	idb, err := buildIDOf(b)
	if err != nil {
		t.Fatal(err)
	}
	if ida == idb || !strings.HasPrefix(ida, "go:") {
		t.Fatalf("build IDs %q and %q: want two different Go build IDs", ida, idb)
	}
}

// A file that is not a Go executable is identified by its content.
func TestBuildIDOfOtherFileIsItsHash(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, []byte("not an executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := buildIDOf(p)
	if err != nil || !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("buildIDOf = %q, %v", id, err)
	}
}
