package health

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/discover"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
)

// DefaultInterval is Wait's polling interval when none is given.
const DefaultInterval = 2 * time.Second

// WaitError is why Wait gave up: an object Failed, or time ran out with
// objects still not Current.
type WaitError struct {
	// Failed holds the failed objects; empty when time ran out.
	Failed []ObjectHealth
	// Pending holds the objects not Current when time ran out.
	Pending []ObjectHealth
	// Total is how many objects were waited for.
	Total int
	// Timeout is the time waited, when time ran out.
	Timeout time.Duration
	// Err is the error of the last fetch, when it failed (the cluster
	// became unreachable while waiting).
	Err error
}

func (e *WaitError) Error() string {
	if len(e.Failed) > 0 {
		return fmt.Sprintf("%d of %d objects failed: %s", len(e.Failed), e.Total, list(e.Failed))
	}
	msg := fmt.Sprintf("timed out after %s waiting for %d of %d objects to become Current", e.Timeout, len(e.Pending), e.Total)
	if len(e.Pending) > 0 {
		msg += ": " + list(e.Pending)
	}
	if e.Err != nil {
		msg += "; last check failed: " + e.Err.Error()
	}
	return msg
}

func (e *WaitError) Unwrap() error { return e.Err }

func list(hs []ObjectHealth) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	return strings.Join(s, "; ")
}

// WaitOptions tune Wait.
type WaitOptions struct {
	// Interval between polls; DefaultInterval when zero.
	Interval time.Duration
	// Timeout ends the wait; zero or less leaves the limit to ctx.
	Timeout time.Duration
	// OnChange hears each object whose status changes, and those not
	// Current when first seen: an object healthy from the start is never
	// reported (status --wait on a healthy release prints no line per
	// object, only what it waits for and how that moves).
	OnChange func(ObjectHealth)
	// Discovery tunes each poll's fetch (set ReleaseID to batch it).
	Discovery discover.Options
}

// Wait polls the objects refs names — re-fetching them all concurrently
// every interval (DefaultInterval when zero) — until every one is Current
// (nil error), one is Failed, or timeout passes (a *WaitError either way;
// a timeout of zero or less leaves the limit to ctx). onChange, when not
// nil, is called for each object when it is first seen and whenever its
// status changes, for progress lines. The health last seen is returned in
// every case.
//
// A failed fetch is retried at the next poll, since a cluster can blip
// during a long rollout; permission and validation errors cannot heal and
// end the wait at once.
func Wait(ctx context.Context, cl *kube.Cluster, refs []inventory.Entry, opts WaitOptions) ([]ObjectHealth, error) {
	interval, timeout, onChange := opts.Interval, opts.Timeout, opts.OnChange
	if interval <= 0 {
		interval = DefaultInterval
	}
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()

	seen := make([]Status, len(refs))
	var hs []ObjectHealth
	var last []discover.Found
	var lastErr error
	for {
		found, _, err := discover.FromInventory(wctx, cl, refs, opts.Discovery)
		switch {
		case err != nil && ctx.Err() != nil:
			return hs, fmt.Errorf("wait for %d objects: %w", len(refs), ctx.Err())
		case err != nil && expired(wctx):
			// The deadline cut the fetch short; report the timeout below.
		case err != nil:
			if k := fault.KindOf(err); k == fault.Permission || k == fault.Validation {
				return hs, fmt.Errorf("wait for %d objects: %w", len(refs), err)
			}
			lastErr = err
		default:
			lastErr = nil
			last = found
			hs = Check(found)
			for i, h := range hs {
				if seen[i] != h.Status {
					first := seen[i] == ""
					seen[i] = h.Status
					if onChange != nil && (!first || h.Status != Current) {
						onChange(h)
					}
				}
			}
			if failed := filter(hs, func(s Status) bool { return s == Failed }); len(failed) > 0 {
				Explain(ctx, cl, found, hs)
				return hs, &WaitError{Failed: filter(hs, func(s Status) bool { return s == Failed }), Total: len(refs)}
			}
			if Healthy(hs) {
				return hs, nil
			}
		}

		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return hs, fmt.Errorf("wait for %d objects: %w", len(refs), ctx.Err())
			}
			Explain(ctx, cl, last, hs)
			pending := filter(hs, func(s Status) bool { return s != Current })
			if hs == nil {
				// Never fetched successfully: everything is pending.
				for _, e := range refs {
					pending = append(pending, ObjectHealth{Entry: e, Status: InProgress, Reason: "not checked"})
				}
			}
			return hs, &WaitError{Pending: pending, Total: len(refs), Timeout: timeout, Err: lastErr}
		case <-ticker.C:
		}
	}
}

func filter(hs []ObjectHealth, keep func(Status) bool) []ObjectHealth {
	var out []ObjectHealth
	for _, h := range hs {
		if keep(h.Status) {
			out = append(out, h)
		}
	}
	return out
}

// expired reports whether ctx's deadline has passed, even if its Done
// channel has not closed yet: client-go's rate limiter refuses a request
// a moment before that happens.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
