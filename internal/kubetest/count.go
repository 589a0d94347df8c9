package kubetest

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// CountingConfig returns a copy of cfg whose clients count every HTTP
// request they send — discovery, GETs, LISTs, retries — in the returned
// counter. Benchmarks and tests use it to measure what a discovery strategy
// really costs on the wire, independently of its own Stats.
func CountingConfig(cfg *rest.Config) (*rest.Config, *atomic.Int64) {
	n := new(atomic.Int64)
	return wrapped(cfg, func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: n} }), n
}

// wrapped is a copy of cfg whose transports are wrapped by wrap.
func wrapped(cfg *rest.Config, wrap func(http.RoundTripper) http.RoundTripper) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(wrap)
	return out
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}

// Request is one request a RecordingConfig's clients sent.
type Request struct {
	Method string
	// Path is the URL path, Query its query (a LIST's label selector).
	Path, Query string
	// Metadata is set when the request asked for metadata only
	// (PartialObjectMetadata): its response carries no spec, data or
	// status.
	Metadata bool
}

// Requests records the requests of a RecordingConfig's clients.
type Requests struct {
	mu   sync.Mutex
	sent []Request
}

// Take returns the requests sent since the last Take and forgets them.
func (r *Requests) Take() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// RecordingConfig returns a copy of cfg whose clients record every request
// they send, so a test can tell which objects were read whole.
func RecordingConfig(cfg *rest.Config) (*rest.Config, *Requests) {
	r := &Requests{}
	return wrapped(cfg, func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{next: rt, r: r} }), r
}

type recordingTransport struct {
	next http.RoundTripper
	r    *Requests
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.r.mu.Lock()
	t.r.sent = append(t.r.sent, Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Metadata: strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata")})
	t.r.mu.Unlock()
	return t.next.RoundTrip(req)
}
