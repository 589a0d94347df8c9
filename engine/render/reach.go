package render

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
)

// Reach is where an environment lets its releases write: the namespaces
// (names and globs) and whether cluster-scoped objects may be rendered,
// as an inventory records them (inventory.Reach, embedded: one type for
// the policy wherever it is held), with the environment it is from. A
// release rendered without an environment has none (nil: no limit).
//
// The render checks it on what it renders; the pipeline checks it again on
// what will be applied, once the cluster has said which kinds are
// namespaced (engine/scope), immediately before any write.
type Reach struct {
	// Namespaces: unset in the environment, the release's own namespace.
	inventory.Reach
	// Environment names the environment the reach is from.
	Environment string `json:"environment"`
	// Explicit: the environment sets namespaces.allowed; otherwise
	// Namespaces is the release's own namespace, wherever that is.
	Explicit bool `json:"explicit,omitempty"`
}

// reachOf reads namespaces of an environment as declared (env is the
// #Environment value, never a release's view of it); allowed defaults to
// the release's own namespace.
func reachOf(env cue.Value, envName, releaseNS string) (*Reach, error) {
	if envName == "" {
		return nil, nil
	}
	r := &Reach{Reach: inventory.Reach{Namespaces: []string{releaseNS}}, Environment: envName}
	ns := env.LookupPath(cue.ParsePath("namespaces"))
	if !ns.Exists() {
		return r, nil
	}
	if a := ns.LookupPath(cue.ParsePath("allowed")); a.Exists() {
		var allowed []string
		if err := a.Decode(&allowed); err != nil {
			return nil, fmt.Errorf("environment %q: namespaces.allowed: %w", envName, err)
		}
		r.Namespaces, r.Explicit = allowed, true
	}
	if cs := ns.LookupPath(cue.ParsePath("clusterScoped")); cs.Exists() {
		if d, ok := cs.Default(); ok {
			cs = d
		}
		b, err := cs.Bool()
		if err != nil {
			return nil, fmt.Errorf("environment %q: namespaces.clusterScoped: %w", envName, err)
		}
		r.ClusterScoped = b
	}
	return r, nil
}

// Recorded is the reach as an inventory records it, and as the entries an
// inventory holds are checked against; a nil reach (no environment)
// limits nothing.
func (r *Reach) Recorded() *inventory.Reach {
	if r == nil {
		return &inventory.Reach{Namespaces: []string{"*"}, ClusterScoped: true}
	}
	return &inventory.Reach{Namespaces: slices.Clone(r.Namespaces), ClusterScoped: r.ClusterScoped}
}

// Allows reports whether namespace ns is one the releases may write to.
// It hides the embedded inventory.Reach's Allows (of an entry), which a
// nil Reach could not call: entries are checked against Recorded().
func (r *Reach) Allows(ns string) bool {
	if r == nil {
		return true
	}
	return inventory.NamespaceMatches(r.Namespaces, ns)
}

// Check says why res may not be written in this environment, or "".
// releaseNS is the release's namespace.
func (r *Reach) Check(res manifest.Resource, releaseNS string) string {
	if r == nil {
		return ""
	}
	o := res.Object
	ns := o.GetNamespace()
	id := fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
	switch {
	case ns == "" && o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" && r.Allows(o.GetName()):
		return "" // a namespace the release may write to, created by it
	case ns == "" && !r.ClusterScoped:
		return fmt.Sprintf("renders %s, a cluster-scoped object, which environment %q does not allow: set `namespaces: clusterScoped: true` in environment %s if this release may write outside its namespace", id, r.Environment, r.Environment)
	case ns != "" && !r.Allows(ns):
		msg := fmt.Sprintf("renders %s into namespace %q, which environment %q does not allow (namespaces.allowed: %s): add %q to `namespaces: allowed:` in environment %s if this release may write there",
			id, ns, r.Environment, strings.Join(r.Namespaces, ", "), ns, r.Environment)
		if ns == "default" && releaseNS != "default" {
			msg += fmt.Sprintf("; the release's namespace is %q: a transformer that writes `namespace: #context.namespace | *\"default\"` gets \"default\", because CUE takes the marked default of that disjunction whatever the context says — fix the provider, or add \"default\" to namespaces.allowed if it is meant", releaseNS)
		}
		return msg
	}
	return ""
}

// builtinNamespaced are the namespaced kinds of the API groups Kubernetes
// ships, keyed "<group>/<Kind>": with the catalog's #ClusterScopedKinds,
// the kinds whose scope the render knows without a cluster.
var builtinNamespaced = map[string]bool{
	"/ConfigMap": true, "/Secret": true, "/Service": true, "/ServiceAccount": true, "/Pod": true,
	"/PersistentVolumeClaim": true, "/Endpoints": true, "/Event": true, "/LimitRange": true,
	"/ResourceQuota": true, "/ReplicationController": true, "/PodTemplate": true,
	"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "apps/ReplicaSet": true,
	"apps/ControllerRevision": true, "batch/Job": true, "batch/CronJob": true,
	"autoscaling/HorizontalPodAutoscaler": true, "policy/PodDisruptionBudget": true,
	"networking.k8s.io/Ingress": true, "networking.k8s.io/NetworkPolicy": true,
	"rbac.authorization.k8s.io/Role": true, "rbac.authorization.k8s.io/RoleBinding": true,
	"coordination.k8s.io/Lease": true, "discovery.k8s.io/EndpointSlice": true, "events.k8s.io/Event": true,
	"storage.k8s.io/CSIStorageCapacity": true, "resource.k8s.io/ResourceClaim": true,
	"resource.k8s.io/ResourceClaimTemplate": true,
}

// inferredScopes says, once per release, which kinds of Kubernetes' own
// API groups the render placed in a namespace without knowing their scope
// (a kind newer than the catalog's table): offline, the table decides;
// apply and diff ask the API server.
func inferredScopes(rs []manifest.Resource) string {
	var kinds []string
	for _, r := range rs {
		gvk := r.GVK()
		builtin := gvk.Group == "" || !strings.Contains(gvk.Group, ".") || strings.HasSuffix(gvk.Group, ".k8s.io")
		key := gvk.Group + "/" + gvk.Kind
		if !builtin || r.Object.GetNamespace() == "" || builtinNamespaced[key] || slices.Contains(kinds, key) {
			continue
		}
		kinds = append(kinds, key)
	}
	if len(kinds) == 0 {
		return ""
	}
	return fmt.Sprintf("the scope of %s is not in the catalog's table: rendered namespaced without a cluster; apply and diff ask the API server, and refuse a cluster-scoped kind the environment does not allow", strings.Join(kinds, ", "))
}

// AllowsAll reports whether every recorded entry is one the environment
// lets the release write: a fast path that reads what an inventory
// records (which whoever may write the inventory Secret can edit) first
// checks it here, and leaves anything else to the full path, which says
// what it leaves alone.
func (r *Reach) AllowsAll(entries []inventory.Entry) bool {
	rec := r.Recorded()
	for _, e := range entries {
		if !rec.Allows(e) {
			return false
		}
	}
	return true
}
