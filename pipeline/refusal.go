package pipeline

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/objects"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/typecheck"
	"github.com/opmodel/pipeline/engine/values"
)

// invalidValue finds the value a field error quotes: `Invalid value:
// "12x": …` (a string, quoted as Go quotes it) or `Invalid value: 12: …`.
var invalidValue = regexp.MustCompile(`Invalid value: ("(?:[^"\\]|\\.)*"|[^:" ]+)`)

// traceRefusal adds to an API server's refusal of a release's objects
// which fields it refused, which value of the release set each and where
// that value comes from (environment, values file, -f), and what to do:
// the API server knows the field path (and for a value it cannot even
// convert, such as a quantity "12x", not even that), only the render
// knows the values source. Other errors are returned as they are.
func traceRefusal(rel *render.Release, err error) error {
	var se apierrors.APIStatus
	if err == nil || rel == nil || !errors.As(err, &se) {
		return err
	}
	// An immutable field is not a wrong value: its error names the field
	// and the way on (--force re-creates), which a hint to correct the
	// value would contradict.
	var ie *objects.ImmutableError
	if errors.As(err, &ie) {
		return err
	}
	type field struct{ path, value, why string }
	var fields []field
	if st := se.Status(); st.Reason == metav1.StatusReasonInvalid && st.Details != nil {
		for _, c := range st.Details.Causes {
			if m := invalidValue.FindStringSubmatch(c.Message); m != nil {
				bad := m[1]
				if u, uerr := strconv.Unquote(bad); uerr == nil {
					bad = u
				}
				fields = append(fields, field{path: c.Field, value: bad})
			}
		}
	}
	if len(fields) == 0 {
		// Refused before validation: find the values the API's types
		// cannot hold.
		for _, r := range rel.Resources {
			for _, inv := range typecheck.Check(r.Object) {
				fields = append(fields, field{path: r.ID().String() + " " + inv.Path, value: inv.Value, why: inv.Why})
			}
		}
	}
	var lines []string
	for _, f := range fields {
		line := fmt.Sprintf("field %s = %q", f.path, f.value)
		if f.why != "" {
			line += " is not " + f.why
		}
		srcs := rel.ValueSources(f.value)
		if len(srcs) > 0 {
			line += ": set by " + strings.Join(srcs, "; and by ")
		} else if f.why == "" {
			continue // the server named it already; nothing to add
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return err
	}
	return fault.Wrap(fault.Validation, fmt.Errorf("%w\n  %s\nnext: correct that value and apply again", err, strings.Join(lines, "\n  ")))
}

// redactReasons replaces, in an apply's error, the release's secrets and the
// values derived from them — short ones too — where the text quotes a
// value, with (secret): the API server quotes the value it refuses
// (`Invalid value: "Ab3x9Q"`, `Invalid value: 70123`), and the redactor of
// published text leaves values under 8 characters alone. Public words
// stay (values.RedactQuoted). The error keeps its chain.
func redactRefusal(rel *render.Release, err error) error {
	if rel == nil || len(rel.Secrets) == 0 {
		return err
	}
	return redact.Redacted(err, func(msg string) string { return values.RedactQuoted(msg, rel.Secrets) })
}

// redactReasons masks the release's secrets in the reasons of an apply's
// result, where they quote a value: a refused object's reason is the API
// server's text. Warnings are opm's own words and quote no value.
func (ar *AppliedRelease) redactReasons(rel *render.Release) {
	if len(rel.Secrets) == 0 {
		return
	}
	for _, list := range [][]ObjectChange{ar.Applied, ar.Stale, ar.Pruned, ar.Skipped, ar.Ghosts} {
		for i := range list {
			list[i].Reason = values.RedactQuoted(list[i].Reason, rel.Secrets)
		}
	}
}

// redactedProgress is ro whose progress events carry reasons with the
// release's secrets masked, as the result does, and whose events for
// objects with hidden names (redact.Hidden) are held back and given, by
// their stand-ins, when flush is called after the apply: streamed in apply
// order, a hidden name would sit where its real name sorts, between public
// neighbours that spell it out.
func redactedProgress(ctx context.Context, ro reconcile.Options, rel *render.Release) (reconcile.Options, func()) {
	if ro.Progress == nil {
		return ro, func() {}
	}
	red := redact.From(ctx)
	progress := ro.Progress
	var mu sync.Mutex
	type held struct {
		stand string
		e     reconcile.Event
	}
	var later []held
	ro.Progress = func(e reconcile.Event) {
		e.Object.Reason = values.RedactQuoted(e.Object.Reason, rel.Secrets)
		if stand, ok := red.Hidden(e.Object.Name); ok {
			mu.Lock()
			later = append(later, held{stand, e})
			mu.Unlock()
			return
		}
		progress(e)
	}
	return ro, func() {
		mu.Lock()
		defer mu.Unlock()
		slices.SortStableFunc(later, func(a, b held) int { return strings.Compare(a.stand, b.stand) })
		for _, h := range later {
			progress(h.e)
		}
		later = nil
	}
}
