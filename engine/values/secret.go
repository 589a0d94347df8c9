package values

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/taint"
)

// minContained is the shortest secret looked for inside longer strings;
// shorter ones are masked only where they are the whole value, so a PIN
// of "7" does not mask every string holding a 7.
const minContained = 4

// HasSecrets reports whether any value of the merged set came from a
// secret source.
func (s *Set) HasSecrets() bool {
	for _, o := range s.Origins {
		if o.Secret {
			return true
		}
	}
	return false
}

// Secrets returns the secret values that survived the merge, as the
// strings they appear as in text (a string as itself, a number or bool in
// its JSON form), longest first.
func (s *Set) Secrets() []string {
	var out []string
	for _, o := range s.Origins {
		if !o.Secret {
			continue
		}
		v, ok := lookup(s.Data, o.Path)
		if !ok {
			continue
		}
		collect(v, &out)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

func collect(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			collect(x[k], out)
		}
	case []any:
		for _, e := range x {
			collect(e, out)
		}
	case string:
		if x != "" {
			*out = append(*out, x)
		}
	case nil:
	default:
		if b, err := json.Marshal(x); err == nil {
			*out = append(*out, string(b))
		}
	}
}

func lookup(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// SecretPaths returns the field paths set from a secret source, sorted.
func (s *Set) SecretPaths() [][]string {
	var out [][]string
	for _, k := range slices.Sorted(maps.Keys(s.Origins)) {
		if o := s.Origins[k]; o.Secret {
			out = append(out, o.Path)
		}
	}
	return out
}

// StandIn returns a copy of s in which every value from a secret source
// is replaced by a sentinel of the same shape that differs from it
// everywhere it can (engine/taint.Sentinel), and no value is marked
// secret: a render from it differs from the real one exactly in what the
// secrets reach, and holds nothing to redact.
func (s *Set) StandIn(sentinel func(any) any) *Set {
	out := s.Replaced(s.SecretPaths(), sentinel)
	for k, o := range out.Origins {
		o.Secret = false
		out.Origins[k] = o
	}
	return out
}

// Replaced returns a copy of s with the value at each of paths replaced by
// f of it; paths s does not hold are ignored.
func (s *Set) Replaced(paths [][]string, f func(any) any) *Set {
	out := &Set{Data: taint.Copy(s.Data).(map[string]any), Origins: maps.Clone(s.Origins)}
	for _, p := range paths {
		out.Data = replaceAt(out.Data, p, f).(map[string]any)
	}
	return out
}

// Leaves returns the path and value of every leaf (a scalar or a list)
// of s that did not come from a secret source, sorted by path.
func (s *Set) Leaves() (paths [][]string, vals []any) {
	for _, k := range slices.Sorted(maps.Keys(s.Origins)) {
		o := s.Origins[k]
		if o.Secret {
			continue
		}
		if v, ok := lookup(s.Data, o.Path); ok {
			paths, vals = append(paths, o.Path), append(vals, v)
		}
	}
	return paths, vals
}

// At returns the value at path.
func (s *Set) At(path []string) (any, bool) { return lookup(s.Data, path) }

func replaceAt(v any, path []string, f func(any) any) any {
	if len(path) == 0 {
		return f(v)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if e, ok := m[path[0]]; ok {
		m[path[0]] = replaceAt(e, path[1:], f)
	}
	return m
}

// Redact removes secret values from a message (a CUE error quotes the
// values it compares): each secret as a quoted string, and as a bare token
// where it stands alone (a number), becomes redact.Mark.
func (s *Set) Redact(msg string) string {
	return Redact(msg, s.Secrets())
}

// Redact is Set.Redact for a list of secrets, longest first.
func Redact(msg string, secrets []string) string {
	for _, sec := range secrets {
		msg = strings.ReplaceAll(msg, fmt.Sprintf("%q", sec), redact.Mark)
		if len(sec) >= minContained {
			msg = strings.ReplaceAll(msg, sec, redact.Mark)
			continue
		}
		// A short secret only as a whole token, not inside "file:12:4".
		re := regexp.MustCompile(`(^|[\s(=,\[])` + regexp.QuoteMeta(sec) + `($|[\s),\]:;])`)
		msg = re.ReplaceAllString(msg, "${1}"+redact.Mark+"${2}")
	}
	return msg
}

// invalidValue is where the API server quotes a value it refuses.
const invalidValue = "Invalid value: "

// RedactQuoted replaces each of secrets where a message quotes a value —
// "value" in Go quotes, after the API server's "Invalid value: ", or as a
// field's value in an object dump the server or opm prints (`Field:815`,
// `"field":815`, `key=815`) — with redact.Mark, however short: text that
// quotes nothing else keeps every public word, so the mask tells nobody
// which public strings are secret (a secret "changed" must not make
// "spec.selector changed" read "spec.selector (secret)"). It is the one
// masker of API refusals, in every command that prints them.
func RedactQuoted(msg string, secrets []string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, fmt.Sprintf("%q", sec), redact.Mark)
		re := regexp.MustCompile(`(` + regexp.QuoteMeta(invalidValue) + `|[:=] ?)` + regexp.QuoteMeta(sec) + `($|[\s),\]}:;"'])`)
		msg = re.ReplaceAllString(msg, "${1}"+redact.Mark+"${2}")
	}
	return msg
}
