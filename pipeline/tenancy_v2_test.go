package pipeline_test

import (
	"fmt"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// tenantDirV2 is tenantDir with release "tools" a module of OPM's v2 line
// (deploytest.V2Core, the objects resource of V2Catalog), on a platform the
// environment subscribes to.
func tenantDirV2(t *testing.T, ns, envBody, releaseBody, objects string) string {
	t.Helper()
	deploytest.Registry(t, deploytest.V2Modules()...)
	return deploytest.Write(t, map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n" +
			"deps: {\n\t\"opmodel.dev/core@v2\": v: \"v2.0.0\"\n\t\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0\"\n}\n",
		"tools/tools.cue": fmt.Sprintf(`package tools

import (
	c "opmodel.dev/core@v2"
	cat "opmodel.dev/catalogs/opm@v2"
)

c.#Module
metadata: {name: "tools", modulePath: "test.example/deploy/tools@v0", version: "0.1.0"}
#config: {}
debugValues: {}
#components: raw: {
	c.#Component
	#resources: (cat.#ObjectsFQN): cat.#Objects
	spec: objects: [%s]
}
`, objects),
		"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	toolsmod "test.example/deploy/tools"
)

environments: tenant: core.#Environment & {
	metadata: name: "tenant"
	namespace: %q
	platform: registry: "opmodel.dev/catalogs/opm@v2": version: "2.0.0"
	%s
}

releases: tools: core.#ModuleRelease & {
	metadata: name: "tools"
	#module: toolsmod
	%s
}
`, ns, envBody, releaseBody),
	})
}

// A tenant's release of an OPM v2 module is held to its environment as an
// older-line release is: bootstrapped with `opm rbac --bootstrap`, it
// applies as the tenant's ServiceAccount; an object it names in another
// namespace is refused before anything is written (the reach); a release
// that widens its #environment (cluster-scoped objects, the
// system:masters group) is refused with the line it does that on; and the
// API server's answers to can-i for the identity are the same after as
// before.
func TestV2ReleaseStaysInItsTenancy(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	sa := "system:serviceaccount:" + ns + ":deployer"
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	impersonate := fmt.Sprintf(`cluster: impersonate: serviceAccount: "%s/deployer"`, ns)
	cm := `{apiVersion: "v1", kind: "ConfigMap", metadata: name: "tools", data: a: "b"}`
	dir := tenantDirV2(t, ns, impersonate, "", cm)
	sel := pipeline.Selection{Dir: dir, Environment: "tenant"}

	// Before its RBAC exists the tenant may not write: the API server says
	// so through impersonation.
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.Assert(t, err != nil, "applied without rights")
	assert.Equal(t, fault.KindOf(err), fault.Permission, "%v", err)
	assert.Check(t, is.Contains(err.Error(), sa))

	rb, err := pipeline.RBAC(t.Context(), pipeline.RBACOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	for _, o := range rb.Releases[0].Objects {
		assert.Check(t, o["kind"] != "ClusterRole" && o["kind"] != "ClusterRoleBinding", "a namespaced v2 release asks for %v", o["kind"])
		assert.NilError(t, createAsAdmin(t, o), "applying %s as printed", o["kind"])
	}
	kubetest.WaitUntilAllowed(t, cs, sa, saGroups, "list", "", "secrets", ns, "")
	before := grants(t, cs, sa, saGroups, ns)
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: sel, ClusterOptions: cluster(t)})
	assert.NilError(t, err, "as the tenant")
	assert.Equal(t, len(res.Releases), 1)
	got, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "tools", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Equal(t, got.Labels["app.kubernetes.io/managed-by"], "open-platform-model")

	// An object in another namespace, and a release that widens its
	// environment: refused before any write.
	other := `{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "planted-` + ns + `", namespace: "kube-system"}, data: a: "b"}`
	crb := `{apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: name: "tools-admin-` + ns + `", roleRef: {apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin"}, subjects: [{kind: "ServiceAccount", name: "deployer", namespace: "` + ns + `"}]}`
	for name, c := range map[string]struct{ release, objects, want string }{
		"another namespace":        {"", cm + ", " + other, `into namespace "kube-system", which environment "tenant" does not allow`},
		"cluster-scoped objects":   {`#environment: namespaces: clusterScoped: true`, crb, `release "tools" sets #environment.namespaces.clusterScoped (at `},
		"the system:masters group": {`#environment: cluster: impersonate: groups: ["system:masters"]`, cm, `release "tools" sets #environment.cluster.impersonate (at `},
	} {
		t.Run(name, func(t *testing.T) {
			d := tenantDirV2(t, ns, impersonate, c.release, c.objects)
			_, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: d, Environment: "tenant"}, ClusterOptions: cluster(t)})
			assert.Assert(t, err != nil, "applied")
			assert.Equal(t, fault.KindOf(err), fault.Validation, "%v", err)
			assert.Check(t, is.Contains(err.Error(), c.want))
		})
	}
	_, err = cs.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "planted-"+ns, metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "the planted ConfigMap was written: %v", err)
	_, err = cs.RbacV1().ClusterRoleBindings().Get(t.Context(), "tools-admin-"+ns, metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "the binding was written: %v", err)
	assert.Equal(t, grants(t, cs, sa, saGroups, ns), before)
}
