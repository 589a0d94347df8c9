package pipeline

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/rbac"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/scope"
)

// RBACOptions select the releases whose rights to compute.
type RBACOptions struct {
	Selection
	ClusterOptions
	// Bootstrap puts first what must exist before the rights can be
	// applied on a fresh cluster: the Namespaces they are in and the
	// impersonated ServiceAccount.
	Bootstrap bool `json:"bootstrap,omitempty"`
}

// RBACResult is, per release, what its environment's impersonated
// identity needs: Roles and RoleBindings (and a ClusterRole and binding
// for cluster-scoped objects).
type RBACResult struct {
	Releases []ReleaseRBAC `json:"releases"`
}

// ReleaseRBAC is one release's rights.
type ReleaseRBAC struct {
	Name        string           `json:"name"`
	Environment string           `json:"environment"`
	Identity    string           `json:"identity"`
	Objects     []map[string]any `json:"objects"`
}

// RBAC renders the selection and computes, with the cluster's RESTMapper
// (asked with the kubeconfig's own credentials), the rights each release's
// impersonated identity needs to apply, diff, prune and lock it.
func RBAC(ctx context.Context, opts RBACOptions) (*RBACResult, error) {
	if err := single(opts.Selection, "rbac"); err != nil {
		return nil, err
	}
	if opts.Environment == "" {
		return nil, fault.Validationf("rbac needs --env: the identity comes from the environment's cluster.impersonate")
	}
	rels, err := render.Render(ctx, opts.RenderOptions(ctx))
	if err != nil {
		return nil, err
	}
	res := &RBACResult{}
	for _, rel := range rels {
		env := kube.EnvCluster{Name: rel.Environment, KubeContext: rel.Cluster.KubeContext, KubeConfig: rel.Cluster.KubeConfig}
		cl, err := kube.Connect(ctx, kube.Flags{Kubeconfig: opts.Kubeconfig, KubeconfigData: opts.KubeconfigData, Context: opts.Context}, env, kube.Options{QPS: opts.QPS, Burst: opts.Burst})
		if err != nil {
			return nil, err
		}
		// The rights follow the objects as they will be applied: the
		// cluster's scopes, within the environment's reach.
		moves, err := scope.Resolve(ctx, cl.Mapper, rel)
		if err != nil {
			return nil, err
		}
		if err := scope.Check(rel, moves); err != nil {
			return nil, err
		}
		objs, err := rbac.For(cl.Mapper, rel, rel.Cluster.ImpersonateUser, rel.Cluster.ImpersonateGroups)
		if err != nil {
			return nil, fault.Wrap(fault.Validation, err)
		}
		rr := ReleaseRBAC{Name: rel.Name, Environment: rel.Environment, Identity: rel.Cluster.ImpersonateUser}
		if opts.Bootstrap {
			objs = append(rbac.Bootstrap(objs, rel.Cluster.ImpersonateUser), objs...)
		}
		for _, o := range objs {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return nil, fmt.Errorf("release %s: encoding %T: %w", rel.Name, o, err)
			}
			delete(m["metadata"].(map[string]any), "creationTimestamp")
			rr.Objects = append(rr.Objects, m)
		}
		res.Releases = append(res.Releases, rr)
	}
	return res, nil
}
