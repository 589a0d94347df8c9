package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/workers"
)

// A panic in the Action, on its own goroutine or on a worker's, is one
// error line in the log, said through the run's redactor: no stack trace,
// and a secret value in the panic's text is masked.
func TestAPanicIsOneRedactedError(t *testing.T) {
	const canary = "canary-token-4827-zz"
	for name, fn := range map[string]func(ctx context.Context) error{
		"on the Action's goroutine": func(context.Context) error { panic(fmt.Sprintf("decoding %s failed", canary)) },
		"on a worker": func(ctx context.Context) error {
			workers.Run(ctx, 2, 4, func(i int) {
				if i == 3 {
					panic(fmt.Errorf("value %q at index %d", canary, i))
				}
			})
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			var log bytes.Buffer
			ctx, action, flush := newAction(t.Context(), func(string) string { return "" }, &log)
			redact.From(ctx).Secrets(canary)
			err := guarded(func() error { return fn(ctx) })
			assert.ErrorContains(t, err, "internal error (a bug")
			action.Errorf("%s", err)
			assert.NilError(t, flush())
			out := log.String()
			assert.Assert(t, strings.Contains(out, "::error::opm failed on an internal error"), out)
			assert.Assert(t, !strings.Contains(out, canary), "the canary reached the log: %s", out)
			assert.Assert(t, !strings.Contains(out, "goroutine "), "a stack trace reached the log: %s", out)
		})
	}
}
