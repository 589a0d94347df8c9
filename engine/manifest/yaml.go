package manifest

import (
	"fmt"
	"slices"
	"unicode"

	yaml "go.yaml.in/yaml/v2"
)

// YAML is obj (an object as decoded from JSON: maps, slices, strings,
// int64, float64, bool, nil) written as sigs.k8s.io/yaml writes it, which
// is what kubectl prints — without that library's round trip through JSON
// text and back (a tenth of `opm render`'s time at 1 000 objects), and
// always in one order: go-yaml sorts keys in a natural order that is not
// always an order ("7" < "07" < "0A" < "7") with an unstable sort of a
// map's random iteration, so the same object could be printed, and
// diffed, several ways. Here keys are put in byte order first and then
// stably sorted in go-yaml's order: the same text every time, and
// go-yaml's text wherever its order is one (FuzzYAMLIsSigsYAML).
func YAML(obj map[string]any) ([]byte, error) {
	b, err := yaml.Marshal(ordered(obj))
	if err != nil {
		return nil, fmt.Errorf("encoding as YAML: %w", err)
	}
	return b, nil
}

// ordered is v with every map a yaml.MapSlice in keyOrder.
func ordered(v any) any {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.SortStableFunc(keys, keyOrder)
		out := make(yaml.MapSlice, len(keys))
		for i, k := range keys {
			out[i] = yaml.MapItem{Key: k, Value: ordered(v[k])}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = ordered(e)
		}
		return out
	}
	return v
}

// keyOrder is go-yaml's order of string map keys (sorter.go's keyList:
// letters before other characters, runs of digits by their value).
func keyOrder(a, b string) int {
	switch {
	case naturalLess(a, b):
		return -1
	case naturalLess(b, a):
		return 1
	}
	return 0
}

// naturalLess is go-yaml v2's keyList.Less for two strings.
func naturalLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			continue
		}
		al, bl := unicode.IsLetter(ar[i]), unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}
