// Package suggest finds the names a user probably meant: "did you mean" for
// a mistyped environment, release, group, provider or field.
//
// Closeness is the Damerau–Levenshtein (optimal string alignment) distance,
// case-insensitive, so one swapped pair of letters counts as one edit, as
// in kubectl's and cobra's suggestions.
package suggest

import (
	"slices"
	"strings"
)

// Closest returns the candidates within a typo's reach of input, nearest
// first (ties in the candidates' order). A typo's reach is one edit for
// names of up to four letters and two beyond, or a candidate that starts
// with what was typed (a name cut short). An exact match is not a
// suggestion.
func Closest(input string, candidates []string) []string {
	in := strings.ToLower(input)
	type hit struct {
		name string
		d    int
	}
	var hits []hit
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if c == input {
			continue
		}
		d := Distance(in, lc)
		limit := 2
		if len([]rune(in)) <= 4 {
			limit = 1
		}
		switch {
		case d <= limit:
			hits = append(hits, hit{c, d})
		case len(in) >= 3 && strings.HasPrefix(lc, in):
			hits = append(hits, hit{c, limit + 1})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.d - b.d })
	// A name that differs only in case is the answer, alone.
	if len(hits) > 0 && hits[0].d == 0 {
		hits = slices.DeleteFunc(hits, func(h hit) bool { return h.d > 0 })
	}
	out := make([]string, 0, len(hits))
	for _, h := range hits {
		if !slices.Contains(out, h.name) {
			out = append(out, h.name)
		}
	}
	return out
}

// DidYouMean is the sentence for Closest's result: "did you mean
// \"staging\"?", "did you mean \"a\" or \"b\"?", or "" when nothing is close.
func DidYouMean(input string, candidates []string) string {
	c := Closest(input, candidates)
	switch len(c) {
	case 0:
		return ""
	case 1:
		return "did you mean " + quote(c[0]) + "?"
	default:
		if len(c) > 3 {
			c = c[:3]
		}
		q := make([]string, len(c))
		for i, s := range c {
			q[i] = quote(s)
		}
		return "did you mean " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1] + "?"
	}
}

func quote(s string) string { return `"` + s + `"` }

// Distance is the optimal-string-alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent runes
// each cost one.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
