// Package values merges the value sources of a release — release values,
// then environment values, then -f files — with "last wins" deep-merge
// semantics that CUE unification cannot express: scalars and lists are
// replaced, structs merge recursively, new fields are added.
//
// Every leaf remembers where it came from, so a validation error can name
// the environment or file that set a bad field and its CUE position.
package values

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"
)

// Origin says where a value was set.
type Origin struct {
	// Source names the value source: `release "blog"`, `environment "staging"`, `file "prod.yaml"`.
	Source string
	// Pos is the CUE position of the value, when known.
	Pos token.Pos
	// Secret marks a value from a SOPS-encrypted file or a secret input:
	// it is masked wherever values are shown and redacted from errors.
	Secret bool
	// Path is the value's field path, one label per element: labels may
	// hold dots (`spring.datasource.password`), so a path is never a
	// dotted string.
	Path []string
}

// String renders the origin for error messages.
func (o Origin) String() string {
	if o.Pos.IsValid() {
		return fmt.Sprintf("%s at %s", o.Source, o.Pos)
	}
	return o.Source
}

// Set is a tree of plain values (map[string]any, []any, string, bool,
// float64 or int64 numbers, nil) with the origin of every leaf.
type Set struct {
	Data    map[string]any
	Origins map[string]Origin // keyed by PathKey(Origin.Path)
}

// PathKey is the map key of a field path: its labels joined by NUL, which
// no CUE label holds, so "a.b" and ["a", "b"] never meet.
func PathKey(path []string) string { return strings.Join(path, "\x00") }

// Empty returns a set with no values.
func Empty() *Set { return &Set{Data: map[string]any{}, Origins: map[string]Origin{}} }

// FromCUE takes the concrete parts of a struct value: fields that are set
// (or have a default) are kept, incomplete ones (a required field nobody
// set yet) are left out for a later source or the final check to supply.
func FromCUE(v cue.Value, source string) (*Set, error) {
	s := Empty()
	if !v.Exists() {
		return s, nil
	}
	if k := v.IncompleteKind(); k&cue.StructKind == 0 {
		return nil, fmt.Errorf("%s: values must be a struct (a mapping of the module's #config fields, e.g. `replicas: 2`), got %v", source, k)
	}
	data, err := s.walk(v, nil, source)
	if err != nil {
		return nil, err
	}
	if m, ok := data.(map[string]any); ok {
		s.Data = m
	}
	return s, nil
}

func (s *Set) walk(v cue.Value, path []string, source string) (any, error) {
	if d, ok := v.Default(); ok {
		v = d
	}
	if v.IncompleteKind() == cue.StructKind {
		out := map[string]any{}
		it, err := v.Fields(cue.Optional(false), cue.Definitions(false), cue.Hidden(false))
		if err != nil {
			if v.Validate() == nil {
				// A struct not chosen yet (a disjunction of structs, such
				// as an OPM v2 #Secret's literal-or-reference): not set,
				// like any incomplete value.
				return nil, nil
			}
			return nil, err
		}
		for it.Next() {
			p := append(slices.Clone(path), it.Selector().Unquoted())
			child, err := s.walk(it.Value(), p, source)
			if err != nil {
				return nil, err
			}
			if child != nil {
				out[p[len(p)-1]] = child
			}
		}
		return out, nil
	}
	if v.Validate(cue.Concrete(true)) != nil {
		return nil, nil // not set yet: leave it to a later source or the final check
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%s: values.%s: %w", source, strings.Join(path, "."), err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	s.Origins[PathKey(path)] = Origin{Source: source, Pos: v.Pos(), Path: slices.Clone(path)}
	return out, nil
}

// Merge overlays o onto s: o wins for scalars and lists, structs merge.
func (s *Set) Merge(o *Set) {
	s.Data = merge(s.Data, o.Data)
	for p := range s.Origins {
		// A value o replaces wholesale (a scalar over a struct, say)
		// takes the origins below it with it.
		if replacedBy(p, o.Origins) {
			delete(s.Origins, p)
		}
	}
	maps.Copy(s.Origins, o.Origins)
}

func replacedBy(p string, by map[string]Origin) bool {
	for q := range by {
		if p == q || strings.HasPrefix(p, q+"\x00") {
			return true
		}
	}
	return false
}

func merge(dst, src map[string]any) map[string]any {
	out := maps.Clone(dst)
	if out == nil {
		out = map[string]any{}
	}
	for k, sv := range src {
		if sm, ok := sv.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = merge(dm, sm)
				continue
			}
		}
		out[k] = sv
	}
	return out
}

// Origin returns where the value at path (or its nearest set ancestor or
// descendant) came from.
func (s *Set) Origin(path ...string) (Origin, bool) {
	for n := len(path); n > 0; n-- {
		if o, ok := s.Origins[PathKey(path[:n])]; ok {
			return o, true
		}
	}
	prefix := PathKey(path) + "\x00"
	for _, p := range slices.Sorted(maps.Keys(s.Origins)) {
		if strings.HasPrefix(p, prefix) {
			return s.Origins[p], true
		}
	}
	return Origin{}, false
}

// JSON returns the merged data as JSON with sorted keys, which CUE reads
// back in the same order every time.
func (s *Set) JSON() ([]byte, error) { return json.Marshal(s.Data) }

// Find lists where a scalar equal to text (as JSON or plain text would
// print it) is set, path order, secret values left out: an error that
// quotes a rejected value can then name the values source that set it.
func (s *Set) Find(text string) []Origin {
	var out []Origin
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(t[k], append(slices.Clone(path), k))
			}
		case []any:
			for i, e := range t {
				walk(e, append(slices.Clone(path), strconv.Itoa(i)))
			}
		case nil:
		default:
			if fmt.Sprint(t) != text {
				return
			}
			o, ok := s.Origin(path...)
			if !ok || o.Secret {
				return
			}
			o.Path = path
			out = append(out, o)
		}
	}
	walk(s.Data, nil)
	return out
}
