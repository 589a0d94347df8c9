package render

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
)

// An environment's policy — where its releases may write (namespaces) and
// to which cluster as whom (cluster) — is the environment's alone: the
// platform team owns environments, a tenant's team owns its releases
// (the usual CODEOWNERS split). CUE would let a release unify more into
// its #environment (`#environment: namespaces: clusterScoped: true`, an
// impersonated group), so the policy is read from environments[E] as the
// deployment declares it, with its defaults made concrete there, and a
// release that sets any of it is an error naming where.

// policyPaths are the fields of an environment that are its policy.
var policyPaths = []string{
	"namespaces.allowed", "namespaces.clusterScoped",
	"cluster.kubeContext", "cluster.kubeConfig", "cluster.impersonate",
}

// declaredEnvironment is environments[name] as the deployment declares it,
// or false when the release's environment is not one of them (a release
// that writes its #environment inline is that environment's author).
func declaredEnvironment(d *load.Deployment, name string) (cue.Value, bool) {
	if name == "" {
		return cue.Value{}, false
	}
	env := d.Root.LookupPath(cue.MakePath(cue.Str("environments"), cue.Str(name)))
	return env, env.Exists()
}

// clusterOf reads an environment's cluster: context, kubeconfig and the
// identity every request is made as.
func clusterOf(env cue.Value) Cluster {
	var c Cluster
	c.KubeContext, _ = env.LookupPath(cue.ParsePath("cluster.kubeContext")).String()
	c.KubeConfig, _ = env.LookupPath(cue.ParsePath("cluster.kubeConfig")).String()
	imp := env.LookupPath(cue.ParsePath("cluster.impersonate"))
	if sa, err := imp.LookupPath(cue.ParsePath("serviceAccount")).String(); err == nil {
		ns, name, _ := strings.Cut(sa, "/")
		c.ImpersonateUser = "system:serviceaccount:" + ns + ":" + name
		c.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	} else if user, err := imp.LookupPath(cue.ParsePath("user")).String(); err == nil {
		c.ImpersonateUser = user
		_ = imp.LookupPath(cue.ParsePath("groups")).Decode(&c.ImpersonateGroups)
	}
	return c
}

// checkPolicyUntouched fails when the release's view of its environment
// (rel's #environment, the declared environment unified with whatever the
// release adds) differs from the environment as declared in any policy
// field, naming the field and where the release sets it.
func checkPolicyUntouched(d *load.Deployment, key, envName string, rel, declared cue.Value) error {
	seen := rel.LookupPath(pathEnvironment)
	raw := d.Root.LookupPath(cue.MakePath(cue.Str("releases"), cue.Str(key), cue.Def("#environment")))
	for _, p := range policyPaths {
		want, got := declared.LookupPath(cue.ParsePath(p)), seen.LookupPath(cue.ParsePath(p))
		if sameValue(want, got) {
			continue
		}
		where := setAt(raw.LookupPath(cue.ParsePath(p)))
		if where == "" {
			where = releasePos(d, key)
		}
		return fault.Validationf("release %q sets #environment.%s (at %s): where a release may write and as whom is environment %q's alone, as the deployment declares it (environments.%s, at %s); remove it from the release, or ask the environment's owners to change environments.%s.%s",
			key, p, where, envName, envName, cmp.Or(d.DeclPos("environments", envName), "environments."+envName), envName, p)
	}
	return nil
}

// sameValue compares two policy values as JSON, defaults taken.
func sameValue(a, b cue.Value) bool {
	if a.Exists() != b.Exists() {
		// A field the environment leaves unset and the release's view
		// fills only with the catalog's default is the same.
		return !b.Exists() || isDefaultOnly(b)
	}
	if !a.Exists() {
		return true
	}
	if d, ok := a.Default(); ok {
		a = d
	}
	if d, ok := b.Default(); ok {
		b = d
	}
	ja, errA := a.MarshalJSON()
	jb, errB := b.MarshalJSON()
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// isDefaultOnly reports whether v is the catalog's schema with its default
// (clusterScoped: *false | bool), which nobody set.
func isDefaultOnly(v cue.Value) bool {
	if setAt(v) != "" {
		return false
	}
	d, ok := v.Default()
	if !ok {
		return false
	}
	b, err := d.Bool()
	return err == nil && !b
}

// setAt says where the user's files set v ("" when only the catalog does).
func setAt(v cue.Value) string {
	if !v.Exists() {
		return ""
	}
	var out []string
	for _, p := range userPos(v) {
		out = append(out, p.String())
	}
	return strings.Join(out, ", ")
}

// policyError wraps a policy read failure.
func policyError(envName string, err error) error {
	return fault.Wrap(fault.Validation, fmt.Errorf("environment %q: %w", envName, err))
}

// EnvironmentCluster returns the cluster and identity environment env of
// the deployment in dir declares, for operations that act on a release
// without rendering it (`opm delete --name … --env E`): they run as the
// environment's identity too.
func EnvironmentCluster(ctx context.Context, dir, env string) (Cluster, error) {
	d, err := load.Load(ctx, dir)
	if err != nil {
		return Cluster{}, err
	}
	v, err := selectEnvironment(d, env)
	if err != nil {
		return Cluster{}, err
	}
	return clusterOf(v), nil
}

// Policy is an environment's policy as the deployment in a directory
// declares it now: the cluster its releases act in and as, and where they
// may write. A command that took a release's identity from a cache takes
// these from here, never from the cache: what decides a security boundary
// is read from the directory each time.
type Policy struct {
	Environment string
	Cluster     Cluster
	// Namespace is the namespace the environment puts its releases in,
	// "" when it declares none.
	Namespace string
	reach     *Reach
}

// PolicyOf evaluates the environments of dir and returns env's policy;
// ok is false when env is not declared there (a release that writes its
// environment inline: only its render knows the policy).
func PolicyOf(ctx context.Context, dir, env string) (p *Policy, ok bool, err error) {
	envs, err := load.Environments(ctx, dir, nil)
	if err != nil {
		return nil, false, err
	}
	v := envs.LookupPath(cue.MakePath(cue.Str(env)))
	if env == "" || !v.Exists() {
		return nil, false, nil
	}
	p = &Policy{Environment: env, Cluster: clusterOf(v)}
	if ns := v.LookupPath(cue.ParsePath("namespace")); ns.IsConcrete() {
		p.Namespace, _ = ns.String()
	}
	if p.reach, err = reachOf(v, env, ""); err != nil {
		return nil, false, policyError(env, err)
	}
	return p, true, nil
}

// Holds reports whether a release in namespace ns is one the policy can
// have rendered: the environment's namespace when it declares one, else
// (allowed namespaces declared) one of those. A cached identity that
// fails it is not trusted.
func (p *Policy) Holds(ns string) bool {
	if p.Namespace != "" {
		return ns == p.Namespace
	}
	return p.reach.Explicit && p.reach.Allows(ns)
}

// Apply sets rel's cluster and reach from the policy, for its namespace.
func (p *Policy) Apply(rel *Release) {
	rel.Cluster = p.Cluster
	r := *p.reach
	r.Namespaces = slices.Clone(r.Namespaces)
	if !r.Explicit {
		r.Namespaces = []string{rel.Namespace}
	}
	rel.Reach = &r
}
