package values_test

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/values"
)

func set(t *testing.T, src, source string) *values.Set {
	t.Helper()
	v := cuecontext.New().CompileString(src, cue.Filename(source+".cue"))
	assert.NilError(t, v.Err())
	s, err := values.FromCUE(v, source)
	assert.NilError(t, err)
	return s
}

func TestMergeLastWins(t *testing.T) {
	base := set(t, `{image: "a", replicas: 1, db: {host: "h", port: 1}, tags: ["x", "y"], nested: {a: 1}}`, "release")
	base.Merge(set(t, `{replicas: 5, db: {host: "env"}, tags: ["z"], nested: "flat", extra: true}`, "env"))
	assert.DeepEqual(t, base.Data, map[string]any{
		"image":    "a",                                        // kept
		"replicas": 5.0,                                        // scalar replaced
		"db":       map[string]any{"host": "env", "port": 1.0}, // structs merge
		"tags":     []any{"z"},                                 // lists replaced, not appended
		"nested":   "flat",                                     // a scalar replaces a struct
		"extra":    true,                                       // new fields added
	})
}

func TestOriginsFollowTheWinner(t *testing.T) {
	base := set(t, `{replicas: 1, db: {host: "h", port: 1}, nested: {a: 1}}`, "release")
	base.Merge(set(t, "{\n\treplicas: 5\n\tnested: \"flat\"\n}", "env"))
	o, ok := base.Origin("replicas")
	assert.Assert(t, ok)
	assert.Equal(t, o.Source, "env")
	assert.Equal(t, o.Pos.Line(), 2, "the position of the winning value")
	o, _ = base.Origin("db", "port")
	assert.Equal(t, o.Source, "release")
	o, _ = base.Origin("nested", "a")
	assert.Equal(t, o.Source, "env", "a value replaced wholesale takes the origins below it")
	o, _ = base.Origin("db")
	assert.Equal(t, o.Source, "release", "a struct's origin is that of a value below it")
}

func TestFromCUESkipsWhatIsNotSetYet(t *testing.T) {
	s := set(t, `{image!: string, replicas: *1 | int, name: string, db: {host!: string, port: 5432}}`, "release")
	assert.DeepEqual(t, s.Data, map[string]any{"replicas": 1.0, "db": map[string]any{"port": 5432.0}})
}

func TestFromCUERejectsNonStructs(t *testing.T) {
	v := cuecontext.New().CompileString(`[1, 2]`)
	_, err := values.FromCUE(v, "file x")
	assert.ErrorContains(t, err, "must be a struct")
}
