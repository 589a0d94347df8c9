package opmv2

import (
	"fmt"
	"maps"
	"slices"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
)

// keys are the field names of a struct (optional ones too), sorted.
func keys(v cue.Value) []string {
	if !v.Exists() {
		return nil
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var out []string
	for it.Next() {
		out = append(out, it.Selector().Unquoted())
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// stringMap decodes labels or annotations; core@v2 allows int, bool and
// lists of them, written as CUE interpolation would ("\(v)").
func stringMap(v cue.Value) (map[string]string, error) {
	out := map[string]string{}
	if !v.Exists() {
		return out, nil
	}
	it, err := v.Fields()
	if err != nil {
		return nil, err
	}
	for it.Next() {
		f := it.Value()
		if d, ok := f.Default(); ok {
			f = d
		}
		switch f.Kind() {
		case cue.StringKind:
			s, _ := f.String()
			out[it.Selector().Unquoted()] = s
		case cue.IntKind, cue.BoolKind, cue.FloatKind:
			out[it.Selector().Unquoted()] = fmt.Sprint(f)
		default:
			return nil, fmt.Errorf("%s: %s is not a string", it.Selector(), f.Kind())
		}
	}
	return out, nil
}

// onlyProvenance reports an error about provenance fields alone
// (metadata.catalogVersion, metadata.description), which upstream's match
// ignores: two catalogs' copies of one primitive may differ there.
func onlyProvenance(err error) bool {
	for _, e := range cueerrors.Errors(err) {
		p := e.Path()
		n := len(p)
		if n < 2 || p[n-2] != "metadata" || (p[n-1] != "catalogVersion" && p[n-1] != "description") {
			return false
		}
	}
	return true
}
