package suggest

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"staging", "staging", 0}, {"stagin", "staging", 1}, {"stagnig", "staging", 1},
		{"prod", "production", 6}, {"tlsSecret", "tlsSecretName", 4}, {"envFrm", "envFrom", 1}, {"ab", "ba", 1},
		{"kitten", "sitting", 3},
	} {
		assert.Equal(t, Distance(c.a, c.b), c.d, "%q %q", c.a, c.b)
		assert.Equal(t, Distance(c.b, c.a), c.d, "symmetric %q %q", c.b, c.a)
	}
}

func TestClosest(t *testing.T) {
	envs := []string{"production", "staging", "staging-eu", "dev"}
	assert.DeepEqual(t, Closest("stagin", envs), []string{"staging", "staging-eu"})
	assert.DeepEqual(t, Closest("Staging", envs), []string{"staging"})
	assert.DeepEqual(t, Closest("prod", envs), []string{"production"}) // a name cut short
	assert.DeepEqual(t, Closest("dve", envs), []string{"dev"})
	assert.Equal(t, len(Closest("qa", envs)), 0)
	assert.Equal(t, len(Closest("staging", []string{"staging", "production"})), 0, "an exact match is no suggestion")
	assert.Equal(t, len(Closest("xyz", nil)), 0)
}

func TestDidYouMean(t *testing.T) {
	assert.Equal(t, DidYouMean("stagin", []string{"staging"}), `did you mean "staging"?`)
	assert.Equal(t, DidYouMean("web", []string{"we", "wet", "webb", "wes"}), `did you mean "we", "wet" or "webb"?`)
	assert.Equal(t, DidYouMean("qa", []string{"staging"}), "")
}
