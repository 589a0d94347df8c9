package review

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/pipeline/operation"
)

// A review opens the one cache as every command does, in its CacheDir when
// given: --no-cache keeps none of any kind, --no-skip no transforms, and a
// key given to a review seals every kind.
func TestReviewOpensTheOneCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(operation.EnvCacheDir, t.TempDir())
	t.Setenv(operation.EnvCacheKey, "")
	assert.Equal(t, Options{CacheDir: dir}.cache().Dir(), dir)
	assert.Assert(t, !Options{}.cache().Keyed())
	assert.Assert(t, Options{CacheKey: []byte("k")}.cache().Keyed())
	assert.Assert(t, Options{CacheKey: []byte("k")}.transforms().Keyed())
	assert.Assert(t, Options{NoCache: true}.cache() == nil)
	assert.Assert(t, Options{NoCache: true}.transforms() == nil)
	assert.Assert(t, Options{NoSkip: true}.transforms() == nil)
	assert.Assert(t, Options{NoSkip: true}.cache() != nil)
}
