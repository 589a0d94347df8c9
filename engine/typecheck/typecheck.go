// Package typecheck finds the fields of a rendered object whose values
// the Go types of the API cannot hold — today quantities ("12x" where a
// resource.Quantity belongs) and int-or-string values — and names them
// by field path.
//
// The API server refuses such an object while converting it ("quantities
// must match the regular expression …"), before validation, so its error
// carries no field path. The built-in kinds' Go types (client-go's
// scheme) say which fields are quantities: walking the object against
// them finds the field the server did not name, without keeping a list of
// quantity fields that would go stale as the API grows.
package typecheck

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// Invalid is one field whose value its type cannot hold.
type Invalid struct {
	// Path is the field path as the API server writes it:
	// spec.template.spec.containers[0].resources.limits[memory].
	Path  string
	Value string
	// Why says what the type expects.
	Why string
}

var (
	quantityType = reflect.TypeOf(resource.Quantity{})
	intOrString  = reflect.TypeOf(intstr.IntOrString{})
)

// Check walks obj against the Go type of its kind; nil for kinds the
// scheme does not know (custom resources: their schema is the CRD's, and
// the server names their fields itself).
func Check(obj *unstructured.Unstructured) []Invalid {
	typed, err := scheme.Scheme.New(obj.GroupVersionKind())
	if err != nil {
		return nil
	}
	var out []Invalid
	walk(reflect.TypeOf(typed).Elem(), obj.Object, "", &out)
	slices.SortFunc(out, func(a, b Invalid) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func walk(t reflect.Type, v any, path string, out *[]Invalid) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == quantityType:
		s, ok := v.(string)
		if !ok {
			return // numbers are quantities too
		}
		if _, err := resource.ParseQuantity(s); err != nil {
			*out = append(*out, Invalid{Path: path, Value: s, Why: "a quantity such as 128Mi, 0.5 or 500m"})
		}
		return
	case t == intOrString:
		return // any string or integer converts; the validators name the field
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
				walk(f.Type, v, path, out)
				continue
			}
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			if fv, ok := m[name]; ok {
				walk(f.Type, fv, join(path, name), out)
			}
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range l {
			walk(t.Elem(), e, path+"["+strconv.Itoa(i)+"]", out)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, e := range m {
			walk(t.Elem(), e, fmt.Sprintf("%s[%s]", path, k), out)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
