package rollout

import (
	"encoding/base64"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// What a failed smoke test quotes (an error, a condition, an Event) never
// carries a Secret's value, in any encoding the release holds it in; a
// value too short to mask without garbling every message is left.
func TestSmokeMasksSecretValuesInEveryEncoding(t *testing.T) {
	const canary = "canary-s3cr3t-value"
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
		"data":       map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(canary)), "pin": base64.StdEncoding.EncodeToString([]byte("42"))},
		"stringData": map[string]any{"token": canary + "-token"},
	}}
	// A ConfigMap's data is not secret.
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}, "data": map[string]any{"k": "plain-value"}}}
	rel := &render.Release{Resources: []manifest.Resource{{Object: secret}, {Object: cm}}}
	r := &smokeRun{secret: secretValues(rel)}

	for _, leak := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary)), canary + "-token", base64.StdEncoding.EncodeToString([]byte(canary + "-token"))} {
		got := r.mask("container failed: password " + leak + " rejected")
		assert.Assert(t, !strings.Contains(got, canary) && !strings.Contains(got, leak), "leaked: %s", got)
		assert.Assert(t, strings.Contains(got, "(masked)"), got)
	}
	assert.Equal(t, r.mask("plain-value and 42"), "plain-value and 42")
}

// A throwaway namespace goes where the environment lets the release
// write: the given prefix, else the fixed start of an allowed glob, else
// a refusal that names the pattern to add.
func TestSmokePrefixFollowsNamespacesAllowed(t *testing.T) {
	rel := func(explicit bool, allowed ...string) *render.Release {
		return &render.Release{Name: "api", Namespace: "shop", Environment: "prod",
			Reach: &render.Reach{Reach: inventory.Reach{Namespaces: allowed}, Explicit: explicit}}
	}
	p, err := SmokePrefix("", &render.Release{Name: "api"})
	assert.NilError(t, err)
	assert.Equal(t, p, "opm-smoke")
	p, err = SmokePrefix("ci", rel(false, "shop"))
	assert.NilError(t, err)
	assert.Equal(t, p, "ci", "without namespaces.allowed the throwaway namespace replaces the release's own")
	p, err = SmokePrefix("", rel(true, "shop", "team-a-*"))
	assert.NilError(t, err)
	assert.Equal(t, p, "team-a-smoke")
	p, err = SmokePrefix("", rel(true, "opm-smoke-*"))
	assert.NilError(t, err)
	assert.Equal(t, p, "opm-smoke")

	_, err = SmokePrefix("", rel(true, "shop"))
	assert.Error(t, err, `environment "prod" lets release api write only into shop, and a smoke test's throwaway namespace opm-smoke-api-… is none of them: add a pattern for throwaway namespaces to its namespaces.allowed, e.g. "shop-smoke-*", or pass a --namespace-prefix one of them admits`)
	_, err = SmokePrefix("ci", rel(true, "team-a-*"))
	assert.ErrorContains(t, err, "throwaway namespace ci-api-… is none of them", "a given prefix is never replaced by a guess")
}
