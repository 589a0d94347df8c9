package values

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// SecretMark replaces a secret value wherever values are shown.
const SecretMark = "(secret)"

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
	for p, o := range s.Origins {
		if !o.Secret {
			continue
		}
		v, ok := lookup(s.Data, strings.Split(p, "."))
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

// Mask returns the JSON document doc (the effective values, which may hold
// module defaults and values derived from secrets) with every value that s
// sets from a secret source replaced by SecretMark, and every other value
// that equals a secret or embeds one of minContained characters or more.
func (s *Set) Mask(doc []byte) ([]byte, error) {
	secrets := s.Secrets()
	if len(secrets) == 0 {
		return doc, nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("masking secret values: %w", err)
	}
	for p, o := range s.Origins {
		if o.Secret {
			v = setAt(v, strings.Split(p, "."))
		}
	}
	v = maskLeaves(v, secrets)
	return json.Marshal(v)
}

func setAt(v any, path []string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if _, ok := m[path[0]]; !ok {
		return v
	}
	if len(path) == 1 {
		m[path[0]] = SecretMark
		return v
	}
	m[path[0]] = setAt(m[path[0]], path[1:])
	return v
}

func maskLeaves(v any, secrets []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskLeaves(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = maskLeaves(e, secrets)
		}
	case nil:
	default:
		text, ok := x.(string)
		if !ok {
			b, _ := json.Marshal(x)
			text = string(b)
		}
		if text != SecretMark && holdsSecret(text, secrets) {
			return SecretMark
		}
	}
	return v
}

func holdsSecret(text string, secrets []string) bool {
	for _, sec := range secrets {
		if text == sec || (len(sec) >= minContained && strings.Contains(text, sec)) {
			return true
		}
	}
	return false
}

// Redact removes secret values from a message (a CUE error quotes the
// values it compares): each secret as a quoted string, and as a bare token
// where it stands alone (a number), becomes SecretMark.
func (s *Set) Redact(msg string) string {
	return Redact(msg, s.Secrets())
}

// Redact is Set.Redact for a list of secrets, longest first.
func Redact(msg string, secrets []string) string {
	for _, sec := range secrets {
		msg = strings.ReplaceAll(msg, fmt.Sprintf("%q", sec), SecretMark)
		if len(sec) >= minContained {
			msg = strings.ReplaceAll(msg, sec, SecretMark)
			continue
		}
		// A short secret only as a whole token, not inside "file:12:4".
		re := regexp.MustCompile(`(^|[\s(=,\[])` + regexp.QuoteMeta(sec) + `($|[\s),\]])`)
		msg = re.ReplaceAllString(msg, "${1}"+SecretMark+"${2}")
	}
	return msg
}
