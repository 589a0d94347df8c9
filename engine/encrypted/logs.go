package encrypted

import (
	"io"
	"sync"

	"github.com/getsops/sops/v3/logging"
)

// quiet sends the sops library's own log lines nowhere. They go to stderr
// directly, past every redactor, and quote file content: a plaintext
// comment of an encrypted file (outside the MAC, so still valid) is
// printed whole with sops 1.x files. What goes wrong is opm's errors' to
// say, in words that name the file and never a value. The loggers are
// the library's (one per key type, made when it loads), so this is done
// once per process.
var quiet = sync.OnceFunc(func() {
	for _, l := range logging.Loggers {
		l.SetOutput(io.Discard)
	}
})
