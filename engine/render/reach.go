package render

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/manifest"
)

// reach is where an environment lets its releases write: the namespaces
// (names and globs) and whether cluster-scoped objects may be rendered. A
// release rendered without an environment has no limit.
type reach struct {
	env           string
	allowed       []string
	clusterScoped bool
}

// reachOf reads #environment.namespaces of a release; allowed defaults to
// the release's own namespace.
func reachOf(rel cue.Value, envName, releaseNS string) (*reach, error) {
	if envName == "" {
		return nil, nil
	}
	r := &reach{env: envName, allowed: []string{releaseNS}}
	ns := rel.LookupPath(cue.MakePath(cue.Def("#environment"), cue.Str("namespaces")))
	if !ns.Exists() {
		return r, nil
	}
	if a := ns.LookupPath(cue.ParsePath("allowed")); a.Exists() {
		var allowed []string
		if err := a.Decode(&allowed); err != nil {
			return nil, fmt.Errorf("environment %q: namespaces.allowed: %w", envName, err)
		}
		r.allowed = allowed
	}
	if cs := ns.LookupPath(cue.ParsePath("clusterScoped")); cs.Exists() {
		if d, ok := cs.Default(); ok {
			cs = d
		}
		b, err := cs.Bool()
		if err != nil {
			return nil, fmt.Errorf("environment %q: namespaces.clusterScoped: %w", envName, err)
		}
		r.clusterScoped = b
	}
	return r, nil
}

func (r *reach) allows(ns string) bool {
	return slices.ContainsFunc(r.allowed, func(glob string) bool {
		ok, err := path.Match(glob, ns)
		return err == nil && ok
	})
}

// check says why res may not be rendered in this environment, or "".
// releaseNS is the release's namespace.
func (r *reach) check(res manifest.Resource, releaseNS string) string {
	if r == nil {
		return ""
	}
	o := res.Object
	ns := o.GetNamespace()
	id := fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
	switch {
	case ns == "" && o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" && r.allows(o.GetName()):
		return "" // a namespace the release may write to, created by it
	case ns == "" && !r.clusterScoped:
		return fmt.Sprintf("renders %s, a cluster-scoped object, which environment %q does not allow: set `namespaces: clusterScoped: true` in environment %s if this release may write outside its namespace", id, r.env, r.env)
	case ns != "" && !r.allows(ns):
		msg := fmt.Sprintf("renders %s into namespace %q, which environment %q does not allow (namespaces.allowed: %s)", id, ns, r.env, strings.Join(r.allowed, ", "))
		if ns == "default" && releaseNS != "default" {
			msg += fmt.Sprintf("; the release's namespace is %q: a transformer that writes `namespace: #context.namespace | *\"default\"` gets \"default\", because CUE takes the marked default of that disjunction whatever the context says — fix the provider, or add \"default\" to namespaces.allowed if it is meant", releaseNS)
		}
		return msg
	}
	return ""
}
