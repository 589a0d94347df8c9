package manifest_test

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/manifest"
)

func TestSealedIdentifiersNeedTheKey(t *testing.T) {
	const d, id = "sha256:0123456789abcdef", "change-sha1-01234567"
	a, b := manifest.NewSealer([]byte("k1")), manifest.NewSealer([]byte("k1"))
	assert.Equal(t, a.Digest(d), b.Digest(d), "one key, one sealed digest: comparable across runs")
	assert.Equal(t, a.ChangeID(id), b.ChangeID(id))
	other := manifest.NewSealer([]byte("k2"))
	assert.Assert(t, a.Digest(d) != other.Digest(d))
	assert.Assert(t, a.ChangeID(id) != other.ChangeID(id))
	run1, run2 := manifest.NewSealer(nil), manifest.NewSealer(nil)
	assert.Assert(t, run1.Digest(d) != run2.Digest(d), "no key: a random one per run")
	assert.Assert(t, strings.HasPrefix(a.Digest(d), manifest.SealedDigestPrefix))
	assert.Equal(t, len(a.ChangeID(id)), len(id))
	assert.Assert(t, a.Digest(d) != a.Digest("sha256:ff"))
	assert.Equal(t, a.Digest(""), "")
}
