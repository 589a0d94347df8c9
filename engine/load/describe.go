package load

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// Describe renders a CUE error as one block per problem: the path and the
// message, then the positions (file:line:col) in the user's files, so a
// user can jump straight to them. Positions inside the embedded catalog are
// shown only when a problem has no other.
func Describe(err error) string {
	return DescribeWith(err, nil)
}

// DescribeWith is Describe with a hook that may rewrite each problem's path
// and add positions (for example where a value was set). The hook sees the
// problem's own positions too. Positions without a file (in text CUE
// decoded itself, such as YAML a module embeds and unmarshals) are shown
// only when the hook did not rewrite the path: a hook that knows the file
// says it in the path.
func DescribeWith(err error, rewrite func(path []string, pos []token.Pos) (string, []token.Pos)) string {
	var b strings.Builder
	all := errors.Errors(err)
	mistyped := wrongTypes(all)
	written := map[string]bool{}
	for _, e := range all {
		w, mistype := mistyped[strings.Join(e.Path(), ".")]
		if mistype && w.said {
			continue
		}
		if mistype {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			// CUE's "empty disjunction" and one "mismatched types" per
			// alternative say one thing: the value has the wrong type.
			w.said = true
			path := strings.Join(e.Path(), ".")
			if rewrite != nil {
				if p, _ := rewrite(e.Path(), errors.Positions(e)); p != "" {
					path = p
				}
			}
			b.WriteString("  " + path + ": " + w.message())
			// The alternatives of one line (`*"info" | "debug" | …`) are
			// one place to look: its first column.
			lines := map[string]bool{}
			ps := slices.Clone(w.positions)
			slices.SortStableFunc(ps, func(a, b token.Pos) int {
				return cmp.Or(strings.Compare(a.Filename(), b.Filename()), cmp.Compare(a.Line(), b.Line()), cmp.Compare(a.Column(), b.Column()))
			})
			for _, p := range userPositions(ps) {
				line := p
				if i := strings.LastIndexByte(p, ':'); i > 0 {
					line = p[:i]
				}
				if !lines[line] {
					lines[line] = true
					b.WriteString("\n      " + p)
				}
			}
			continue
		}
		// Error() keeps wrapped causes that Msg() drops ("import failed:
		// cannot find package …"); the path is put back below.
		path := strings.Join(e.Path(), ".")
		msg := strings.TrimPrefix(e.Error(), path+": ")
		var extra []token.Pos
		own := errors.Positions(e)
		if rewrite != nil {
			if p, pos := rewrite(e.Path(), own); p != "" {
				path, extra = p, pos
				own = slices.DeleteFunc(slices.Clone(own), func(p token.Pos) bool { return p.Filename() == "" })
			}
		}
		if path != "" {
			msg = path + ": " + msg
		}
		entry := "  " + msg
		for _, p := range userPositions(append(extra, own...)) {
			entry += "\n      " + p
		}
		// CUE reports one missing field once per conjunct that requires
		// it: one line says it.
		if written[entry] {
			continue
		}
		written[entry] = true
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(entry)
	}
	return b.String()
}

// SyntheticFile names CUE the engine compiles itself (the merged values):
// its positions mean nothing to a user, who is shown where each value was
// set instead.
const SyntheticFile = "opm:merged-values.json"

func userPositions(all []token.Pos) []string {
	var user, catalog []string
	seen := map[string]bool{}
	for _, p := range all {
		if !p.IsValid() || p.Filename() == SyntheticFile {
			continue
		}
		s := p.String()
		if seen[s] {
			continue
		}
		seen[s] = true
		if strings.HasPrefix(p.Filename(), EmbeddedRoot) {
			catalog = append(catalog, strings.TrimPrefix(s, EmbeddedRoot))
			continue
		}
		user = append(user, s)
	}
	if len(user) == 0 && len(catalog) > 0 {
		return catalog[:1]
	}
	return user
}

// describeLoad is Describe for the loader's errors, with what to do for
// the ones a first session meets.
func describeLoad(dir string, err error) string {
	msg := Describe(err)
	switch {
	case strings.Contains(msg, "matched no packages") || strings.Contains(msg, "no CUE files"):
		return msg + "\n  " + dir + " has cue.mod/ but no CUE file of a package in the directory itself: add one, e.g. deploy.cue with\n" +
			"      package deploy\n" +
			"      import core \"github.com/opmodel/pipeline/catalog@v0\"\n" +
			"      environments: [Name=string]: core.#Environment & {metadata: name: Name}\n" +
			"      releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}"
	case strings.Contains(msg, "found packages"):
		return msg + "\n  every CUE file directly in " + dir + " must declare the same package: rename the package clause of the stray file, or move the file into a directory of its own"
	}
	return msg
}

// mismatched is CUE's message for a value of one type unified with
// another: `conflicting values "3" and 1 (mismatched types string and int)`.
var mismatched = regexp.MustCompile(`^conflicting values (.+) and (.+) \(mismatched types (\w+) and (\w+)\)$`)

// conflicting is CUE's message for two values of one type that differ:
// `conflicting values "debug" and "verbose"`, one per alternative of an
// enum the given value is not.
var conflicting = regexp.MustCompile(`^conflicting values (.+) and (.+)$`)

// wrongType is one value that no alternative of its field takes: none of
// its types (wanted), none of its values (allowed).
type wrongType struct {
	given, givenType string
	wanted           []string
	allowed          []string
	positions        []token.Pos
	said             bool
}

func (w *wrongType) message() string {
	if len(w.allowed) == 0 {
		return fmt.Sprintf("%s is %s %s, but this field takes %s", w.given, article(w.givenType), w.givenType, strings.Join(w.wanted, " or "))
	}
	takes := strings.Join(w.allowed, ", ")
	for _, t := range w.wanted {
		takes += ", or any " + t
	}
	return fmt.Sprintf("%s is not one of the values this field takes: %s", w.given, takes)
}

func article(typ string) string {
	if strings.ContainsRune("aeiou", rune(typ[0])) {
		return "an"
	}
	return "a"
}

// wrongTypes finds the paths whose every problem is a type mismatch of the
// same given value (plus the "empty disjunction" that sums them up), and
// what the value should have been.
func wrongTypes(errs []errors.Error) map[string]*wrongType {
	type seen struct {
		values      [][2]string // each mismatch's two values
		types       [][2]string
		other       bool
		disjunction bool // CUE summed them up as an empty disjunction
		positions   []token.Pos
	}
	byPath := map[string]*seen{}
	for _, e := range errs {
		path := strings.Join(e.Path(), ".")
		if path == "" {
			continue
		}
		s := byPath[path]
		if s == nil {
			s = &seen{}
			byPath[path] = s
		}
		s.positions = append(s.positions, errors.Positions(e)...)
		msg := strings.TrimPrefix(e.Error(), path+": ")
		if m := mismatched.FindStringSubmatch(msg); m != nil {
			s.values = append(s.values, [2]string{m[1], m[2]})
			s.types = append(s.types, [2]string{m[3], m[4]})
		} else if m := conflicting.FindStringSubmatch(msg); m != nil {
			// Two values of one type: the alternative is a value, not a type.
			s.values = append(s.values, [2]string{m[1], m[2]})
			s.types = append(s.types, [2]string{"", ""})
		} else if strings.Contains(msg, "errors in empty disjunction") {
			s.disjunction = true
		} else {
			s.other = true
		}
	}
	out := map[string]*wrongType{}
	for path, s := range byPath {
		if s.other || len(s.values) == 0 {
			continue
		}
		// The given value is the one every problem names: beside a type
		// another alternative takes (a mismatch), or beside a value of
		// its own type (an enum's).
		for side := range 2 {
			given := s.values[0][side]
			w := &wrongType{given: given, positions: s.positions}
			ok := true
			for i, v := range s.values {
				other, otherType, typ := v[1], s.types[i][1], s.types[i][0]
				if v[0] != given {
					if v[1] != given {
						ok = false
						break
					}
					other, otherType, typ = v[0], s.types[i][0], s.types[i][1]
				}
				if typ != "" {
					if w.givenType != "" && w.givenType != typ {
						ok = false
						break
					}
					w.givenType = typ
				}
				if otherType == "" {
					w.allowed = appendNew(w.allowed, other)
				} else {
					w.wanted = appendNew(w.wanted, otherType)
				}
			}
			// A single conflict outside a disjunction (x: "a" & "b") is
			// said best in CUE's own words.
			enum := len(w.allowed) > 0 && s.disjunction
			if ok && (w.givenType != "" && len(w.allowed) == 0 || enum) && (len(s.values) > 1 || side == 0) {
				out[path] = w
				break
			}
		}
	}
	return out
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
