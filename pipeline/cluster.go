package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/scope"
)

// ClusterOptions say how to reach the cluster. Each release's environment
// may name a kubeContext (and kubeConfig); the rule is: the kubeconfig is
// Kubeconfig/KubeconfigData, else the environment's, else the default
// loading rules; the context is Context, else the environment's, else the
// current one. An environment context missing from the kubeconfig is an
// error, never a fall-back to the current context.
type ClusterOptions struct {
	// Kubeconfig is a kubeconfig file path.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// KubeconfigData is kubeconfig content (from a CI secret); it wins over
	// Kubeconfig and is never written to disk or printed.
	KubeconfigData []byte `json:"-"`
	// Context overrides every environment's kubeContext.
	Context string `json:"context,omitempty"`
	// QPS and Burst override the client rate limits (defaults 1000/2000).
	QPS   float32 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`

	// ignoreEnvironment connects every release to the cluster Kubeconfig
	// and Context name, whatever its environment pins: a smoke test runs on
	// the throwaway cluster it was given, never on the environment's own.
	ignoreEnvironment bool
}

// clusters connects once per distinct cluster selection, so releases of
// one environment share clients and discovery caches; within a session
// (WithSession), every step of the command shares them: the apply, its
// fast path and its health wait connect and discover once.
type clusters struct {
	opts   ClusterOptions
	shared *connections
}

// connections are the clusters connected so far, by everything that
// selects one.
type connections struct {
	mu    sync.Mutex
	byKey map[connectionKey]*connection
	// dialed counts the connections made (each with its API discovery).
	dialed int
}

// connection is one cluster, connected by the first caller while others
// of the same key wait (and callers of other keys do not).
type connection struct {
	mu sync.Mutex
	cl *kube.Cluster
}

type connectionKey struct {
	kubeconfig, data, context string
	qps                       float32
	burst                     int
	ignoreEnvironment         bool
	env                       kube.EnvCluster
}

func newConnections() *connections { return &connections{byKey: map[connectionKey]*connection{}} }

func newClusters(ctx context.Context, opts ClusterOptions) *clusters {
	if s := sessionOf(ctx); s != nil {
		return &clusters{opts: opts, shared: s.connections}
	}
	return &clusters{opts: opts, shared: newConnections()}
}

// For returns the cluster a rendered release deploys to.
func (c *clusters) For(ctx context.Context, r *render.Release) (*kube.Cluster, error) {
	env := kube.EnvCluster{Name: r.Environment, KubeContext: r.Cluster.KubeContext, KubeConfig: r.Cluster.KubeConfig}
	if c.opts.ignoreEnvironment {
		env = kube.EnvCluster{Name: r.Environment}
	}
	// The identity holds even where the cluster comes from elsewhere.
	env.ImpersonateUser, env.ImpersonateGroups = r.Cluster.ImpersonateUser, strings.Join(r.Cluster.ImpersonateGroups, ",")
	key := connectionKey{kubeconfig: c.opts.Kubeconfig, data: string(c.opts.KubeconfigData), context: c.opts.Context,
		qps: c.opts.QPS, burst: c.opts.Burst, ignoreEnvironment: c.opts.ignoreEnvironment, env: env}
	c.shared.mu.Lock()
	conn, ok := c.shared.byKey[key]
	if !ok {
		conn = &connection{}
		c.shared.byKey[key] = conn
	}
	c.shared.mu.Unlock()
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if conn.cl != nil {
		return conn.cl, nil
	}
	cl, err := kube.Connect(ctx, kube.Flags{Kubeconfig: c.opts.Kubeconfig, KubeconfigData: c.opts.KubeconfigData, Context: c.opts.Context}, env, kube.Options{QPS: c.opts.QPS, Burst: c.opts.Burst})
	if err != nil {
		return nil, err // not kept: the next caller tries again
	}
	conn.cl = cl
	c.shared.mu.Lock()
	c.shared.dialed++
	c.shared.mu.Unlock()
	return cl, nil
}

// forRelease returns the cluster rel deploys to, after that cluster has
// decided which of rel's objects are namespaced (see engine/scope); each
// object it moved comes back as a warning for the release.
func (c *clusters) forRelease(ctx context.Context, rel *render.Release) (*kube.Cluster, []string, error) {
	cl, err := c.For(ctx, rel)
	if err != nil {
		return nil, nil, err
	}
	moves, err := scope.Resolve(ctx, cl.Mapper, rel)
	if err != nil {
		return cl, nil, err
	}
	// The reach again, on what will be applied: the last check before any
	// write (apply, prune, rollback and smoke all come through here).
	if err := scope.Check(rel, moves); err != nil {
		return cl, nil, err
	}
	warnings := make([]string, 0, len(moves))
	for _, m := range moves {
		warnings = append(warnings, m.String())
	}
	return cl, warnings, nil
}

// asIdentity says who was refused: a permission error of a cluster that
// impersonates names the identity, so "forbidden" reads as the tenant's
// RBAC speaking, not the pipeline's credentials.
func asIdentity(cl *kube.Cluster, err error) error {
	if err == nil || cl == nil || cl.Identity == "" || fault.KindOf(err) != fault.Permission {
		return err
	}
	return fault.Wrap(fault.Permission, fmt.Errorf("as %s (the environment's cluster.impersonate): %w", cl.Identity, err))
}
