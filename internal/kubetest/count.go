package kubetest

import (
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// CountingConfig returns a copy of cfg whose clients count every HTTP
// request they send — discovery, GETs, LISTs, retries — in the returned
// counter. Benchmarks and tests use it to measure what a discovery strategy
// really costs on the wire, independently of its own Stats.
func CountingConfig(cfg *rest.Config) (*rest.Config, *atomic.Int64) {
	n := new(atomic.Int64)
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, n: n}
	})
	return out, n
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}
