package buildinfo

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// BuildID identifies the running executable's code: the Go build ID the
// linker wrote into it (what `go tool buildid` prints), which changes
// with any change to the program's code, its dependencies or the Go
// toolchain, whatever -X strings it was linked with. Read from the ELF
// note .note.go.buildid (a few microseconds), else from the marker the
// linker puts at the start of the text of Mach-O and PE binaries, else
// the executable's SHA-256 (a full read, still exact). A fingerprint
// that includes it is moved by every rebuild with other code.
func BuildID() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the running executable: %w", err)
	}
	return buildIDOf(exe)
}

// goNoteType is the type of the ELF note, named "Go", that the Go
// linker writes the build ID into.
const goNoteType = 4

var errNoBuildID = errors.New("no Go build ID")

func buildIDOf(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading the build ID of %s: %w", path, err)
	}
	defer f.Close()
	if id, err := elfBuildID(f); err == nil {
		return "go:" + id, nil
	}
	if id, err := markerBuildID(f); err == nil {
		return "go:" + id, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// elfBuildID reads the Go build ID note of an ELF executable.
func elfBuildID(r io.ReaderAt) (string, error) {
	ef, err := elf.NewFile(r)
	if err != nil {
		return "", err
	}
	s := ef.Section(".note.go.buildid")
	if s == nil {
		return "", errNoBuildID
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return "", errNoBuildID
	}
	bo := ef.ByteOrder
	nameSize, descSize, typ := bo.Uint32(b[0:]), bo.Uint32(b[4:]), bo.Uint32(b[8:])
	name := b[12:]
	if typ != goNoteType || nameSize != 4 || len(name) < 4 || string(name[:3]) != "Go\x00" {
		return "", errNoBuildID
	}
	desc := b[16:]
	if uint32(len(desc)) < descSize || descSize == 0 {
		return "", errNoBuildID
	}
	return string(desc[:descSize]), nil
}

// markerBuildID finds `\xff Go build ID: "…"\n \xff` in the first 32 KiB,
// where the Go linker writes it for other executable formats.
func markerBuildID(r io.ReaderAt) (string, error) {
	buf := make([]byte, 32<<10)
	n, err := r.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	buf = buf[:n]
	const start = "\xff Go build ID: \""
	i := bytes.Index(buf, []byte(start))
	if i < 0 {
		return "", errNoBuildID
	}
	rest := buf[i+len(start):]
	j := bytes.Index(rest, []byte("\"\n \xff"))
	if j <= 0 {
		return "", errNoBuildID
	}
	return string(rest[:j]), nil
}
