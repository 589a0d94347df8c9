package load

import (
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
// and add positions (for example where a value was set).
func DescribeWith(err error, rewrite func(path []string) (string, []token.Pos)) string {
	var b strings.Builder
	for i, e := range errors.Errors(err) {
		if i > 0 {
			b.WriteByte('\n')
		}
		// Error() keeps wrapped causes that Msg() drops ("import failed:
		// cannot find package …"); the path is put back below.
		path := strings.Join(e.Path(), ".")
		msg := strings.TrimPrefix(e.Error(), path+": ")
		var extra []token.Pos
		if rewrite != nil {
			if p, pos := rewrite(e.Path()); p != "" {
				path, extra = p, pos
			}
		}
		if path != "" {
			msg = path + ": " + msg
		}
		b.WriteString("  " + msg)
		for _, p := range userPositions(append(extra, errors.Positions(e)...)) {
			b.WriteString("\n      " + p)
		}
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
