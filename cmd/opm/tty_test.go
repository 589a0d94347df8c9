//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// openPTY opens a pseudo-terminal pair: what opm writes to tty, a test
// reads from pty.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	assert.NilError(t, err)
	n, err := unix.IoctlGetInt(int(pty.Fd()), unix.TIOCGPTN)
	assert.NilError(t, err)
	assert.NilError(t, unix.IoctlSetPointerInt(int(pty.Fd()), unix.TIOCSPTLCK, 0))
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	assert.NilError(t, err)
	t.Cleanup(func() { pty.Close(); tty.Close() })
	return pty, tty
}

// runOnTTY runs opm with its stdout on a terminal and returns what the
// terminal showed.
func runOnTTY(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	pty, tty := openPTY(t)
	shown := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, pty) // until the terminal closes (EIO)
		shown <- b.String()
	}()
	var errb bytes.Buffer
	code := runWithInput(t.Context(), args, strings.NewReader(""), tty, &errb)
	tty.Close()
	return code, <-shown, errb.String()
}

// On a real terminal, with no flag: diffs are coloured and an apply's
// lines say how far the release is; NO_COLOR turns the colour off there.
func TestOnATerminal(t *testing.T) {
	dir := retitledExamples(t)
	code, shown, errOut := runOnTTY(t, "review", dir, "--base", "main", "--env", "staging", "-r", "blog")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(shown, "\x1b[32m+"), "no colour on a terminal:\n%q", shown)

	t.Setenv("NO_COLOR", "1")
	code, shown, errOut = runOnTTY(t, "review", dir, "--base", "main", "--env", "staging", "-r", "blog")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, !strings.Contains(shown, "\x1b["), "NO_COLOR, yet escape codes:\n%q", shown)

	ns := env.Namespace(t)
	app := deploytest.Dir(t, ns, `name: "web"`)
	code, shown, errOut = runOnTTY(t, "apply", "--no-wait", app, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	for _, line := range []string{"[1/3] ", "[2/3] ", "[3/3] "} {
		assert.Check(t, strings.Contains(shown, line), "no %q on the terminal:\n%s", line, shown)
	}
}
