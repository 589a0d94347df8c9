package pipeline_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/golden"

	"github.com/opmodel/pipeline/pipeline"
)

// TestJSONOutputsKeepTheirShape pins what every command's -o json prints:
// each result type is filled, every exported field at every depth, and
// encoded as writeJSON does
// (testdata/json/*.golden; `go test ./pipeline -run JSONOutputs -update`
// rewrites them). Filling by reflection rather than by hand means a
// refactor of the Go types behind a result cannot change a key, a nesting,
// an omitempty or a type of the JSON without this test failing, and it
// needs no edit when only the Go types move.
func TestJSONOutputsKeepTheirShape(t *testing.T) {
	results := map[string]any{
		"apply":            &pipeline.ApplyResult{},   // apply, prune
		"changes":          &pipeline.ChangeSet{},     // diff, review
		"delete":           &pipeline.DeleteResult{},  // delete
		"deploy":           &pipeline.DeployResult{},  // apply of a fleet
		"explain":          &[]pipeline.Explanation{}, // explain
		"gates":            &pipeline.GatesResult{},   // gates
		"history":          &pipeline.HistoryResult{}, // history
		"partial-review":   &pipeline.PartialReview{}, // review --shard
		"plan":             &pipeline.Plan{},          // plan
		"rbac":             &pipeline.RBACResult{},    // rbac
		"render":           &pipeline.RenderResult{},  // render
		"repair":           &pipeline.RepairResult{},  // inventory repair
		"review-plan":      &pipeline.ReviewPlan{},    // review --plan
		"rollback":         &pipeline.RollbackResult{},
		"rollout":          &pipeline.RolloutResult{}, // rollout, rollback of a fleet
		"smoke":            &pipeline.SmokeResult{},
		"status":           &pipeline.StatusResult{},
		"unlock":           &pipeline.UnlockResult{},
		"progress-event":   &pipeline.ProgressEvent{}, // the Action's and Dagger's progress lines
		"released-changes": &pipeline.ReleaseChanges{},
	}
	for name, v := range results {
		t.Run(name, func(t *testing.T) {
			empty, err := encode(v)
			if err != nil {
				t.Fatal(err)
			}
			fill(reflect.ValueOf(v).Elem(), name, 0)
			full, err := encode(v)
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, "# empty\n"+empty+"# every field set\n"+full, "json/"+name+".golden")
		})
	}
}

// encode is writeJSON's encoding (cmd/opm/select.go).
func encode(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.String(), err
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// fill sets every exported field under v to a value of its type (the same
// for every field, so a Go rename or move changes nothing the JSON shows);
// path only bounds recursive types, which stop at a depth where the JSON
// already shows the shape.
func fill(v reflect.Value, path string, depth int) {
	if depth > 16 {
		return
	}
	if v.Type() == rawMessage {
		v.SetBytes([]byte(`{"raw":"text"}`))
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("text")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), path, depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), path+"[0]", depth+1)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, path+".key", depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, path+".value", depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			// Fields the JSON leaves out are filled too: a type may spell
			// them itself (a MarshalJSON).
			if f.IsExported() {
				fill(v.Field(i), path+"."+f.Name, depth+1)
			}
		}
	}
	// Interfaces and funcs stay nil: no command's JSON holds one.
}
