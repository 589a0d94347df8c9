package objects

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// requestLog records "METHOD path" of every request sent through it.
type requestLog struct {
	next http.RoundTripper
	mu   *sync.Mutex
	seen *[]string
}

func (l requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	*l.seen = append(*l.seen, req.Method+" "+req.URL.Path)
	l.mu.Unlock()
	return l.next.RoundTrip(req)
}

// GetAll reads a group of four or more objects of one type in one
// namespace with one metadata LIST and GETs only those that exist; smaller
// groups are read with a GET each; a kind the cluster does not serve is
// absent, not an error.
func TestGetAllListsGroupsAndGetsWhatExists(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t, Options{})
	var rs []manifest.Resource
	for _, n := range []string{"cm-0", "cm-1", "cm-2", "cm-3", "cm-4"} {
		rs = append(rs, configMap(t, ns, n, "rendered"))
	}
	// cm-0 and cm-1 exist already, cm-1 with other data.
	assert.Equal(t, c.Apply(t.Context(), rs[0], nil, false).Action, manifest.Created)
	_, err := cluster(t).Clientset.CoreV1().ConfigMaps(ns).Create(t.Context(), configMapObj(ns, "cm-1", "theirs"), metav1.CreateOptions{})
	assert.NilError(t, err)
	rs = append(rs,
		res(t, ns, "{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: NS}, stringData: {k: v}}"),
		res(t, ns, "{apiVersion: getall.test.example/v1, kind: Nothing, metadata: {name: x, namespace: NS}}"),
	)

	var mu sync.Mutex
	var seen []string
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestLog{next: rt, mu: &mu, seen: &seen} })
	cl, err := kube.FromConfig(cfg, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	logged := New(cl, Options{})
	_, _ = logged.Mapping(rs[0].GVK().GroupKind(), "v1") // discovery first, not counted
	mu.Lock()
	seen = nil
	mu.Unlock()

	live, err := logged.GetAll(t.Context(), rs)
	assert.NilError(t, err)
	assert.Equal(t, len(live), len(rs))
	for _, r := range rs {
		u, ok := live[r.ID()]
		assert.Assert(t, ok, "%s missing from the result", r.ID())
		switch r.Object.GetName() {
		case "cm-0":
			assert.Assert(t, u != nil)
			assert.Check(t, is.DeepEqual(u.Object["data"], map[string]any{"key": "rendered"}))
		case "cm-1":
			assert.Assert(t, u != nil)
			assert.Check(t, is.DeepEqual(u.Object["data"], map[string]any{"key": "theirs"}))
		default:
			assert.Check(t, u == nil, "%s should be absent", r.ID())
		}
	}

	var reads []string
	for _, s := range seen {
		if strings.Contains(s, "/namespaces/"+ns+"/") {
			reads = append(reads, strings.Replace(s, "/api/v1/namespaces/"+ns+"/", "", 1))
		}
	}
	slices.Sort(reads)
	assert.DeepEqual(t, reads, []string{"GET configmaps", "GET configmaps/cm-0", "GET configmaps/cm-1", "GET secrets/s"})
}

func configMapObj(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"key": value}}
}
