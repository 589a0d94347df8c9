// Package taint finds the parts of a render that carry a secret (taint
// tracking as program analysis means it; nothing to do with node taints).
//
// It does not guess from text. Matching output against the secrets' text
// misses whatever a function derived from them (a base64 encoding, a
// sha256 checksum annotation, an upper-cased copy, a DSN that URL-encodes
// a password) and masks public fields that merely equal a secret, which
// turns the mask into an oracle ("this public string is the PIN"). Instead
// a release with secrets is rendered twice: as asked, and with every secret
// replaced by a Sentinel of the same shape. Whatever differs between the two
// renders derives from a secret, whatever produced it, and nothing else
// does.
package taint

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Sentinel returns a value of v's shape that differs from v wherever it
// can while keeping what a schema usually constrains: a string keeps its
// length and each character its class (digit, lower or upper case letter),
// a number its sign, digit count and integrality, a bool flips, and lists
// and structs are replaced element by element. It is stand-in number 0
// of Variant.
func Sentinel(v any) any { return Variant(0)(v) }

// Variant returns stand-in number n: each n moves the characters of a
// value by steps of its own, independent of every other n's. A function
// of a secret that happens to map the secret and one stand-in alike (one
// that keeps a single bit of a character does so half the time) is
// caught by another: a field is secret-derived when any stand-in changes
// it.
func Variant(n int) func(any) any {
	return func(v any) any {
		return sentinel(v, func(s string) string { return shift(s, n) }, func(f float64) float64 { return shiftNumber(f, n) })
	}
}

// ShapeVariant returns stand-in number n for a value written in the
// repository, which its module's author can read: like Variant's, every
// digit and letter moves within its class and a number keeps its sign,
// digit count and integrality, but where each character goes is drawn
// from the value's shape — its length, and each character's class or, for
// any other character, the character — not from the value. Two values of
// one shape get one stand-in (a character the draw would leave in place
// takes the class's first instead), so what a stand-in render made for one
// is the stand-in render of the other: the component cache then has the
// trace of a value moved to another of its shape. Never for a value from a
// secret source: a module that can predict the stand-in can make a
// function of a secret come out alike for both (Variant draws its steps
// from the secret for that).
func ShapeVariant(n int) func(any) any {
	return func(v any) any {
		return sentinel(v, func(s string) string { return draw(s, n) }, func(f float64) float64 { return drawNumber(f, n) })
	}
}

func sentinel(v any, str func(string) string, num func(float64) float64) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = sentinel(e, str, num)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = sentinel(e, str, num)
		}
		return out
	case string:
		return str(x)
	case bool:
		return !x
	case float64:
		return num(x)
	case int64:
		return int64(num(float64(x)))
	case int:
		return int(num(float64(x)))
	}
	return v
}

// steps is the stream of pseudo-random steps a stand-in moves the
// characters of s by: SHA-256 of s in counter mode. Moving every character
// one step, as a fixed rule would, let a module compute fields that come
// out alike for a secret and its stand-in (the code of a character
// divided by two is the same for 'a' and 'b'), so they were never masked
// and a review showed them; steps a module cannot predict without the
// secret leave it nothing to design for. The steps depend on s and the
// variant alone, so the same secret masks the same fields on every run
// (a run drawn at random would show other fields each time).
type steps struct {
	seed  []byte
	block [sha256.Size]byte
	n     uint64
	used  int
}

func newSteps(s string, variant int) *steps {
	seed := "opm taint stand-in v2\x00" + s
	if variant > 0 {
		seed = fmt.Sprintf("opm taint stand-in v2 variant %d\x00%s", variant, s)
	}
	return &steps{seed: []byte(seed), used: sha256.Size}
}

// next returns a step in [1, size-1]: never 0, so every character moves.
func (st *steps) next(size int) int {
	if st.used == len(st.block) {
		var ctr [8]byte
		binary.BigEndian.PutUint64(ctr[:], st.n)
		st.n++
		st.block = sha256.Sum256(append(slices.Clip(st.seed), ctr[:]...))
		st.used = 0
	}
	b := st.block[st.used]
	st.used++
	return 1 + int(b)%(size-1)
}

// classOf is the class a stand-in keeps of a character: its first member
// and size; size 0 for a character that is kept as it is.
func classOf(c byte) (base byte, size int) {
	switch {
	case c >= '0' && c <= '9':
		return '0', 10
	case c >= 'a' && c <= 'z':
		return 'a', 26
	case c >= 'A' && c <= 'Z':
		return 'A', 26
	}
	return 0, 0
}

// moveChars replaces every digit and letter c of s by to(c, its class,
// a step of st in [1, size-1]); a string with neither gets one character
// more, so it still differs.
func moveChars(s string, st *steps, to func(c, base byte, size, step int) byte) string {
	b := []byte(s)
	changed := false
	for i, c := range b {
		base, size := classOf(c)
		if size == 0 {
			continue
		}
		b[i] = to(c, base, size, st.next(size))
		changed = true
	}
	if !changed {
		return s + "~"
	}
	return string(b)
}

// shift moves every digit and letter within its class by a step of
// steps.
func shift(s string, variant int) string {
	return moveChars(s, newSteps(s, variant), func(c, base byte, size, step int) byte {
		return base + byte((int(c-base)+step)%size)
	})
}

// shape is what ShapeVariant draws from: each digit and letter as its
// class, every other character as itself.
func shape(s string) string {
	b := []byte(s)
	for i, c := range b {
		if base, size := classOf(c); size > 0 {
			b[i] = base
		}
	}
	return string(b)
}

// draw puts a character of its class, drawn from s's shape, in place of
// every digit and letter of s; one the draw would leave in place becomes
// its class's first ('0', 'a', 'A'), which the draw never gives.
func draw(s string, variant int) string {
	return moveChars(s, newSteps("shape\x00"+shape(s), variant), func(c, base byte, _, step int) byte {
		if d := base + byte(step); d != c {
			return d
		}
		return base
	})
}

// shiftNumber moves the digits of a number's decimal form as shift moves
// a string's; a leading digit that would become 0 becomes 1, so the digit
// count holds.
func shiftNumber(f float64, variant int) float64 {
	return moveNumber(f, func(s string) string { return shift(s, variant) }, func(byte) byte { return '1' })
}

// drawNumber draws the digits of a number's decimal form as draw draws a
// string's; a leading digit that would become 0 becomes 1 (2 when it was
// 1), so the digit count holds.
func drawNumber(f float64, variant int) float64 {
	return moveNumber(f, func(s string) string { return draw(s, variant) }, func(was byte) byte {
		if was == '1' {
			return '2'
		}
		return '1'
	})
}

// moveNumber is f with the digits of its decimal form moved by move; a
// leading digit move turned into 0 becomes lead(the digit it was), and a
// number that moved nowhere is one more.
func moveNumber(f float64, move func(string) string, lead func(was byte) byte) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	abs := math.Abs(f)
	orig := strconv.FormatFloat(abs, 'f', -1, 64)
	b := []byte(move(orig))
	if b[0] == '0' && orig[0] != '0' {
		b[0] = lead(orig[0])
	}
	out, err := strconv.ParseFloat(string(b), 64)
	if err != nil || out == abs {
		out = abs + 1
	}
	if f < 0 {
		return -out
	}
	return out
}

// Field is a field whose value derives from a secret.
type Field struct {
	// Path names the field: map keys, and list indexes in decimal.
	Path []string `json:"path"`
	// Key: the last label itself derives from a secret (a map key such as
	// "token-<secret>"), not only the value under it.
	Key bool `json:"key,omitempty"`
}

// Compare returns the fields of real that differ in sentinel: leaves with
// other values, lists of another length (whole), and keys sentinel does
// not have (Key). Sorted by path.
func Compare(real, sentinel any) []Field {
	var out []Field
	compare(real, sentinel, nil, &out)
	slices.SortFunc(out, func(a, b Field) int { return slices.Compare(a.Path, b.Path) })
	return out
}

// Union returns the fields of a and b, each once, sorted by path: what
// several stand-ins found between them.
func Union(a, b []Field) []Field {
	out := slices.Concat(a, b)
	slices.SortFunc(out, func(x, y Field) int {
		if c := slices.Compare(x.Path, y.Path); c != 0 {
			return c
		}
		return cmpBool(x.Key, y.Key)
	})
	return slices.CompactFunc(out, func(x, y Field) bool { return x.Key == y.Key && slices.Equal(x.Path, y.Path) })
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func compare(a, b any, path []string, out *[]Field) {
	at := func(k string) []string { return append(slices.Clip(path), k) }
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, Field{Path: slices.Clone(path)})
			return
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok {
				*out = append(*out, Field{Path: at(k), Key: true})
				continue
			}
			compare(e, f, at(k), out)
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			*out = append(*out, Field{Path: slices.Clone(path)})
			return
		}
		for i := range x {
			compare(x[i], y[i], at(strconv.Itoa(i)), out)
		}
	default:
		if !equalLeaf(a, b) {
			*out = append(*out, Field{Path: slices.Clone(path)})
		}
	}
}

func equalLeaf(a, b any) bool {
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return fmt.Sprintf("%T:%v", a, a) == fmt.Sprintf("%T:%v", b, b)
}

// Mask returns a copy of v with the value of every field replaced by
// value(old) and every Key field's key by key(old key). Paths that are not
// in v are ignored: v may be the other side of a diff, shaped differently.
func Mask(v any, fields []Field, value func(any) any, key func(string) string) any {
	out := Copy(v)
	for _, f := range fields {
		out = maskAt(out, f, 0, value, key)
	}
	return out
}

func maskAt(v any, f Field, i int, value func(any) any, key func(string) string) any {
	if i == len(f.Path) {
		return value(v)
	}
	label := f.Path[i]
	switch x := v.(type) {
	case map[string]any:
		e, ok := x[label]
		if !ok {
			return v
		}
		if f.Key && i == len(f.Path)-1 {
			delete(x, label)
			x[key(label)] = value(e)
			return x
		}
		x[label] = maskAt(e, f, i+1, value, key)
	case []any:
		n, err := strconv.Atoi(label)
		if err != nil || n < 0 || n >= len(x) {
			return v
		}
		x[n] = maskAt(x[n], f, i+1, value, key)
	}
	return v
}

// Copy returns a deep copy of a tree of plain values (maps, lists,
// scalars), as JSON decodes them.
func Copy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = Copy(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = Copy(e)
		}
		return c
	}
	return v
}

// Leaves returns the text of every leaf under the fields of v (strings as
// themselves, other scalars in their JSON form) and of every Key label:
// the derived values a last line of defence looks for in free text.
func Leaves(v any, fields []Field) []string {
	var out []string
	for _, f := range fields {
		cur := v
		for i, label := range f.Path {
			switch x := cur.(type) {
			case map[string]any:
				if f.Key && i == len(f.Path)-1 {
					out = append(out, label)
				}
				cur = x[label]
			case []any:
				n, err := strconv.Atoi(label)
				if err != nil || n < 0 || n >= len(x) {
					cur = nil
					break
				}
				cur = x[n]
			default:
				cur = nil
			}
		}
		collect(cur, &out)
	}
	return out
}

func collect(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			*out = append(*out, k)
			collect(e, out)
		}
	case []any:
		for _, e := range x {
			collect(e, out)
		}
	case string:
		*out = append(*out, x)
	case nil:
	default:
		*out = append(*out, fmt.Sprint(x))
	}
}

// Objects compares the objects of two renders, real and sentinel, and
// returns for each object of real (same index) the fields that derive
// from a secret. Objects are paired by apiVersion, kind, namespace and
// name, then, for names that differ (a name derived from a secret), in
// order within the same apiVersion, kind and namespace. An object with no
// counterpart exists because of a secret: every field but its apiVersion
// and kind is tainted.
func Objects(real, sentinel []map[string]any) [][]Field {
	out := make([][]Field, len(real))
	used := make([]bool, len(sentinel))
	paired := make([]int, len(real))
	byID := map[string]int{}
	for j, o := range sentinel {
		byID[identity(o, true)] = j
	}
	for i, o := range real {
		paired[i] = -1
		if j, ok := byID[identity(o, true)]; ok && !used[j] {
			paired[i], used[j] = j, true
		}
	}
	for i, o := range real {
		if paired[i] >= 0 {
			continue
		}
		for j, s := range sentinel {
			if !used[j] && identity(o, false) == identity(s, false) {
				paired[i], used[j] = j, true
				break
			}
		}
	}
	for i, o := range real {
		if paired[i] < 0 {
			out[i] = whole(o)
			continue
		}
		out[i] = Compare(o, sentinel[paired[i]])
	}
	return out
}

func identity(o map[string]any, withName bool) string {
	meta, _ := o["metadata"].(map[string]any)
	id := fmt.Sprint(o["apiVersion"], "/", o["kind"], "/", meta["namespace"])
	if withName {
		id += "/" + fmt.Sprint(meta["name"])
	}
	return id
}

func whole(o map[string]any) []Field {
	var out []Field
	for k, v := range o {
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			meta, _ := v.(map[string]any)
			for mk := range meta {
				out = append(out, Field{Path: []string{"metadata", mk}})
			}
		default:
			out = append(out, Field{Path: []string{k}})
		}
	}
	slices.SortFunc(out, func(a, b Field) int { return slices.Compare(a.Path, b.Path) })
	return out
}

// NameTainted reports whether fields say the object's name derives from a
// secret.
func NameTainted(fields []Field) bool {
	for _, f := range fields {
		if len(f.Path) == 2 && f.Path[0] == "metadata" && f.Path[1] == "name" ||
			len(f.Path) == 1 && f.Path[0] == "metadata" {
			return true
		}
	}
	return false
}
