package load_test

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/reads"
)

// A memo serves the same load once per directory and options, and says
// what it read every time, as a load does; other options load again.
func TestMemoLoadsOnceForTheSameOptions(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"d.cue":              "package d\n\nreleases: {}\nx: 1\n",
	})
	m := load.NewMemo()
	first, second := reads.New(), reads.New()
	a, err := m.LoadWith(t.Context(), dir, load.Options{Reads: first})
	assert.NilError(t, err)
	b, err := m.LoadWith(t.Context(), dir, load.Options{Reads: second})
	assert.NilError(t, err)
	assert.Assert(t, a == b, "the same options load once")
	assert.DeepEqual(t, second.Paths(), first.Paths())
	assert.Assert(t, len(first.Paths()) > 0)

	// A change to what is evaluated is another load: an overlay (a pruned
	// root), closedness, another directory.
	d := filepath.Join(dir, "d.cue")
	for name, opts := range map[string]load.Options{
		"pruned":  {Pruned: map[string][]byte{d: []byte("package d\n\nreleases: {}\nx: 2\n")}},
		"relaxed": {RelaxedClosedness: true},
	} {
		c, err := m.LoadWith(t.Context(), dir, opts)
		assert.NilError(t, err, name)
		assert.Assert(t, c != a, name)
	}
	other := t.TempDir()
	assert.NilError(t, os.CopyFS(other, os.DirFS(dir)))
	c, err := m.LoadWith(t.Context(), other, load.Options{})
	assert.NilError(t, err)
	assert.Assert(t, c != a)

	var none *load.Memo
	e, err := none.LoadWith(t.Context(), dir, load.Options{})
	assert.NilError(t, err)
	assert.Assert(t, e != a, "no memo, a load of its own")
}

// Holds says what a memo would serve without loading.
func TestMemoHoldsWhatItLoaded(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"example.com/d@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"d.cue":              "package d\n\nreleases: {}\n",
	})
	m := load.NewMemo()
	assert.Assert(t, !m.Holds(dir, load.Options{}))
	_, err := m.LoadWith(t.Context(), dir, load.Options{})
	assert.NilError(t, err)
	assert.Assert(t, m.Holds(dir, load.Options{}))
	assert.Assert(t, !m.Holds(dir, load.Options{RelaxedClosedness: true}))
	var none *load.Memo
	assert.Assert(t, !none.Holds(dir, load.Options{}))
}
