package load

import (
	"strings"

	"cuelang.org/go/cue/errors"
)

// Describe renders a CUE error as one block per problem: the path and the
// message, then every position it has (file:line:col), indented, so a user
// can jump straight to it.
func Describe(err error) string {
	d := strings.TrimRight(errors.Details(err, nil), "\n")
	return "  " + strings.ReplaceAll(d, "\n", "\n  ")
}
