package render

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// reachComponents render raw objects (core.#Objects) in an environment
// whose namespaces block is NAMESPACES; the release namespace is team-a.
const reachComponents = `	#components: raw: {
		core.#Objects
		spec: objects: [OBJECT]
	}`

func renderReach(t *testing.T, namespaces, object string) ([]*Release, error) {
	t.Helper()
	dir := t.TempDir()
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "cue.mod/module.cue"), []byte(strictModuleFile), 0o644))
	src := testDeployment(`namespace: "team-a", `+namespaces, strings.Replace(reachComponents, "OBJECT", object, 1))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(src), 0o644))
	return Render(t.Context(), Options{Dir: dir, Environment: "staging"})
}

const (
	cmIn       = `{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "cm", namespace: "%s"}, data: a: "b"}`
	clusterObj = `{apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: name: "reader", rules: []}`
)

// A release writes only where its environment allows: its own namespace by
// default, cluster-scoped objects only with clusterScoped. (The embedded
// catalog always writes the release namespace; other namespaces come from
// other providers, below.)
func TestEnvironmentNamespacesLimitClusterScopedObjects(t *testing.T) {
	for name, c := range map[string]struct {
		namespaces, object string
		want               string // "" renders
	}{
		"its own namespace by default":    {"", strings.Replace(cmIn, "%s", "team-a", 1), ""},
		"cluster-scoped by default":       {"", clusterObj, `renders ClusterRole reader, a cluster-scoped object, which environment "staging" does not allow: set ` + "`namespaces: clusterScoped: true`"},
		"cluster-scoped allowed":          {`namespaces: clusterScoped: true`, clusterObj, ""},
		"its own Namespace object":        {"", `{apiVersion: "v1", kind: "Namespace", metadata: name: "team-a"}`, ""},
		"someone else's Namespace object": {"", `{apiVersion: "v1", kind: "Namespace", metadata: name: "kube-system"}`, "renders Namespace kube-system, a cluster-scoped object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderReach(t, c.namespaces, c.object)
			if c.want == "" {
				assert.NilError(t, err)
				return
			}
			assert.Assert(t, err != nil, "rendered")
			assert.Equal(t, fault.KindOf(err), fault.Validation)
			assert.Check(t, is.Contains(err.Error(), c.want))
			assert.Check(t, is.Contains(err.Error(), `component "raw": transformer github.com/opmodel/pipeline/catalog@v0#ObjectsTransformer (provider kubernetes) (declared at github.com/opmodel/pipeline/catalog@v0/transformers_objects.cue:`))
		})
	}
}

// opmServiceNamespace publishes the OPM-shaped provider with its Service
// transformer writing namespace as expr, and renders OPMDeployment whose
// staging environment adds namespaces.
func opmServiceNamespace(t *testing.T, expr, namespaces string) error {
	t.Helper()
	prov := deploytest.OPMProvider
	prov.Files = maps.Clone(prov.Files)
	replaced := false
	for f, src := range prov.Files {
		svc := strings.Index(src, "#ServiceTransformer:")
		if svc < 0 {
			continue
		}
		old := "namespace: #context.namespace, labels: #context.labels}"
		i := strings.Index(src[svc:], old)
		assert.Assert(t, i > 0)
		prov.Files[f] = src[:svc+i] + "namespace: " + expr + ", labels: #context.labels}" + src[svc+i+len(old):]
		replaced = true
	}
	assert.Assert(t, replaced)
	deploytest.Registry(t, deploytest.OPMCore, deploytest.OPMResources, prov, deploytest.OPMApp)
	deploy := strings.Replace(deploytest.OPMDeployment, "\tnamespace: \"staging\"\n", "\tnamespace: \"staging\"\n\t"+namespaces+"\n", 1)
	dir := deploytest.Write(t, map[string]string{"cue.mod/module.cue": deploytest.OPMModuleFile, "deploy.cue": deploy})
	_, err := Render(t.Context(), Options{Dir: dir, Environment: "staging"})
	return err
}

// Namespaces another provider writes into: only the allowed names and
// globs, and OPM's own provider's `#context.namespace | *"default"` is
// caught with an explanation instead of applying into default.
func TestEnvironmentNamespacesLimitOtherProviders(t *testing.T) {
	where := "transformer opmodel.dev/providers/kubernetes@v0#ServiceTransformer (provider kubernetes) (declared at "
	for name, c := range map[string]struct{ expr, namespaces, want string }{
		"own namespace":          {"#context.namespace", "", ""},
		"another by default":     {`"kube-system"`, "", `renders Service web into namespace "kube-system", which environment "staging" does not allow (namespaces.allowed: staging): add "kube-system" to ` + "`namespaces: allowed:`" + ` in environment staging`},
		"a glob":                 {`"staging-jobs"`, `namespaces: allowed: ["staging", "staging-*"]`, ""},
		"outside the glob":       {`"team-b"`, `namespaces: allowed: ["staging", "staging-*"]`, `into namespace "team-b", which environment "staging" does not allow (namespaces.allowed: staging, staging-*)`},
		"OPM's default":          {`#context.namespace | *"default"`, "", "the release's namespace is \"staging\": a transformer that writes `namespace: #context.namespace | *\"default\"` gets \"default\""},
		"OPM's default, allowed": {`#context.namespace | *"default"`, `namespaces: allowed: ["staging", "default"]`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := opmServiceNamespace(t, c.expr, c.namespaces)
			if c.want == "" {
				assert.NilError(t, err)
				return
			}
			assert.Assert(t, err != nil, "rendered")
			assert.Equal(t, fault.KindOf(err), fault.Validation)
			assert.Check(t, is.Contains(err.Error(), c.want))
			assert.Check(t, is.Contains(err.Error(), where))
		})
	}
}

// cluster.impersonate names the identity every request is made as.
func TestImpersonationIsReadFromTheEnvironment(t *testing.T) {
	own := strings.Replace(cmIn, "%s", "team-a", 1)
	rels, err := renderReach(t, `cluster: impersonate: serviceAccount: "team-a/deployer"`, own)
	assert.NilError(t, err)
	assert.Equal(t, rels[0].Cluster.ImpersonateUser, "system:serviceaccount:team-a:deployer")
	assert.DeepEqual(t, rels[0].Cluster.ImpersonateGroups, []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"})

	rels, err = renderReach(t, `cluster: impersonate: {user: "alice", groups: ["team-a"]}`, own)
	assert.NilError(t, err)
	assert.Equal(t, rels[0].Cluster.ImpersonateUser, "alice")
	assert.DeepEqual(t, rels[0].Cluster.ImpersonateGroups, []string{"team-a"})

	_, err = renderReach(t, `cluster: impersonate: serviceAccount: "deployer"`, own)
	assert.Assert(t, err != nil, "a ServiceAccount without its namespace")
	assert.Equal(t, fault.KindOf(err), fault.Validation)
}

// renderOverride renders the reach fixture with releaseFields added to the
// release (a tenant's edit) and the environment's namespaces as given.
func renderOverride(t *testing.T, envFields, releaseFields, object string) error {
	t.Helper()
	dir := t.TempDir()
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "cue.mod/module.cue"), []byte(strictModuleFile), 0o644))
	src := testDeployment(`namespace: "team-a", `+envFields, strings.Replace(reachComponents, "OBJECT", object, 1))
	src += "\n// the tenant's file\nreleases: app: " + releaseFields + "\n"
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "deploy.cue"), []byte(src), 0o644))
	_, err := Render(t.Context(), Options{Dir: dir, Environment: "staging"})
	return err
}

// A release cannot widen its environment's policy by unifying into its
// #environment: not clusterScoped left at its default, not the namespaces,
// not the identity it runs as. The error names the field and the line of
// the release that sets it; the environment's own settings still apply.
func TestAReleaseCannotChangeItsEnvironmentsPolicy(t *testing.T) {
	own := strings.Replace(cmIn, "%s", "team-a", 1)
	for name, c := range map[string]struct{ env, release, object, field string }{
		"clusterScoped left at its default": {"", `#environment: namespaces: clusterScoped: true`, clusterObj, "namespaces.clusterScoped"},
		"clusterScoped spelled false":       {`namespaces: clusterScoped: false`, `#environment: namespaces: clusterScoped: true`, clusterObj, "namespaces.clusterScoped"},
		"more namespaces":                   {"", `#environment: namespaces: allowed: ["*"]`, own, "namespaces.allowed"},
		"another group":                     {`cluster: impersonate: user: "alice"`, `#environment: cluster: impersonate: groups: ["system:masters"]`, own, "cluster.impersonate"},
		"an identity where there was none":  {"", `#environment: cluster: impersonate: user: "admin"`, own, "cluster.impersonate"},
		"another context":                   {`cluster: kubeContext: "prod"`, `#environment: cluster: kubeContext: "kind-admin"`, own, "cluster.kubeContext"},
	} {
		t.Run(name, func(t *testing.T) {
			err := renderOverride(t, c.env, c.release, c.object)
			assert.Assert(t, err != nil, "rendered")
			assert.Equal(t, fault.KindOf(err), fault.Validation)
			assert.Check(t, is.Contains(err.Error(), `release "app" sets #environment.`+c.field+` (at `))
			assert.Check(t, is.Contains(err.Error(), `deploy.cue:17:`), "the tenant's line")
			assert.Check(t, is.Contains(err.Error(), `environment "staging"'s alone`))
		})
	}
	// Restating what the environment says changes nothing and renders.
	assert.NilError(t, renderOverride(t, `namespaces: clusterScoped: true`, `#environment: namespaces: clusterScoped: true`, clusterObj))
}

// A kind of Kubernetes' own API groups that the catalog's table does not
// know is rendered namespaced, and the render says that only the cluster
// can tell; a known one (now ServiceCIDR among them) is cluster-scoped.
func TestUnknownBuiltinScopeIsSaid(t *testing.T) {
	rels, err := renderReach(t, "", `{apiVersion: "networking.k8s.io/v9", kind: "FutureThing", metadata: name: "x"}`)
	assert.NilError(t, err)
	assert.Check(t, is.Contains(strings.Join(rels[0].Warnings, "\n"), "the scope of networking.k8s.io/FutureThing is not in the catalog's table"))
	_, err = renderReach(t, "", `{apiVersion: "networking.k8s.io/v1", kind: "ServiceCIDR", metadata: name: "x", spec: cidrs: ["10.0.0.0/24"]}`)
	assert.ErrorContains(t, err, "renders ServiceCIDR x, a cluster-scoped object")
	rels, err = renderReach(t, "", strings.Replace(cmIn, "%s", "team-a", 1))
	assert.NilError(t, err)
	assert.Equal(t, len(rels[0].Warnings), 0, "a ConfigMap's scope is known")
}
