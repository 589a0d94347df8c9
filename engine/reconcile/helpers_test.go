package reconcile

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// cluster returns fresh clients (and a fresh discovery cache), as each
// opm invocation has.
func cluster(t *testing.T) *kube.Cluster {
	t.Helper()
	cl, err := kube.FromConfig(env.Config, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	return cl
}

// --- releases rendered from CUE -------------------------------------------

// deployment is a CUE deployment directory in a temp dir with one release,
// "minecraft", deployed by environment "test" into a test namespace.
type deployment struct {
	t   *testing.T
	dir string
	ns  string
}

func newDeployment(t *testing.T, ns string) *deployment {
	d := &deployment{t: t, dir: t.TempDir(), ns: ns}
	d.write("cue.mod/module.cue", `module: "example.com/test@v0"
language: version: "v0.12.0"
deps: "github.com/opmodel/pipeline/catalog@v0": v: "v0.1.0"
`)
	return d
}

func (d *deployment) write(name, content string) {
	d.t.Helper()
	p := filepath.Join(d.dir, name)
	assert.NilError(d.t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(d.t, os.WriteFile(p, []byte(content), 0o644))
}

// module writes the module package: its version and body (#config and
// #components).
func (d *deployment) module(version, body string) *deployment {
	d.write("mod/mod.cue", fmt.Sprintf(`package mod

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion: "example.com/test/mod@v0"
	name:       "app"
	version:    %q
}
%s
`, version, body))
	return d
}

// values writes the deployment package with the release's values.
func (d *deployment) values(values string) *deployment {
	d.write("deploy.cue", fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	m "example.com/test/mod"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
environments: test: namespace: %q
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}
releases: minecraft: {
	#module: m
	values: %s
}
`, d.ns, values))
	return d
}

func (d *deployment) render() *render.Release {
	d.t.Helper()
	rels, err := render.Render(d.t.Context(), render.Options{Dir: d.dir, Environment: "test"})
	assert.NilError(d.t, err)
	assert.Equal(d.t, len(rels), 1)
	return rels[0]
}

// minecraftModule is the RFC's running example: a StatefulSet and a
// Service named by the `name` value, and a PersistentVolumeClaim.
const minecraftModule = `
#config: {
	name:    *"minecraft" | string
	claim:   *"config" | string
	// badPort makes the Service invalid for the API server (scenario B).
	badPort: *false | bool
	kind:    *"stateful" | "stateless"
}
#components: app: {
	core.#Workload
	core.#Service
	core.#Volumes
	spec: {
		workload: {
			type:     #config.kind
			name:     #config.name
			replicas: 1
			container: {
				image: "itzg/minecraft-server:2025.10.0"
				ports: game: containerPort: 25565
			}
		}
		service: {
			name: #config.name
			ports: game: {
				port: 25565
				if #config.badPort {targetPort: 70000}
			}
		}
		volumes: (#config.claim): size: "1Gi"
	}
}
`

// --- releases built directly -------------------------------------------

// direct builds a release from YAML objects (NS is replaced by ns), with
// the labels the catalog would give them. It is for what the catalog
// cannot render: CRDs, Namespaces, objects outside the release namespace.
func direct(t *testing.T, name, ns string, docs ...string) *render.Release {
	t.Helper()
	sum := sha1.Sum([]byte(ns + "/" + name))
	h := hex.EncodeToString(sum[:])
	rel := &render.Release{
		Name: name, Namespace: ns,
		ReleaseID:  fmt.Sprintf("%s-%s-5%s-8%s-%s", h[:8], h[8:12], h[13:16], h[17:20], h[20:32]),
		Module:     render.Module{Path: "example.com/direct@v0", Name: "direct", Version: "0.1.0"},
		ValuesText: "{}",
	}
	for _, doc := range docs {
		r := obj(t, ns, doc)
		labels := r.Object.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[manifest.LabelManagedBy] = manifest.ManagedByOPM
		labels[manifest.LabelReleaseName] = name
		labels[manifest.LabelReleaseUUID] = rel.ReleaseID
		r.Object.SetLabels(labels)
		rel.Resources = append(rel.Resources, r)
	}
	manifest.Sort(rel.Resources)
	var err error
	rel.ManifestDigest, err = manifest.Digest(rel.Resources)
	assert.NilError(t, err)
	rel.ChangeID = manifest.ChangeID(rel.Module.Path, rel.Module.Version, rel.ValuesText, rel.ManifestDigest)
	return rel
}

// obj parses one YAML object; a "# component: X" first line sets the
// component (default "app").
func obj(t *testing.T, ns, doc string) manifest.Resource {
	t.Helper()
	component := "app"
	doc = strings.TrimSpace(doc)
	if rest, ok := strings.CutPrefix(doc, "# component: "); ok {
		component, doc, _ = strings.Cut(rest, "\n")
	}
	j, err := yaml.YAMLToJSON([]byte(strings.ReplaceAll(doc, "NS", ns)))
	assert.NilError(t, err)
	u := &unstructured.Unstructured{}
	assert.NilError(t, u.UnmarshalJSON(j))
	return manifest.Resource{Object: u, Component: component}
}

func configMapDoc(namespace, name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {key: value}\n", name, namespace)
}

// --- looking at the cluster -----------------------------------------------

// live GETs an object by apiVersion, kind, namespace and name; nil when absent.
func live(t *testing.T, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	cl := cluster(t)
	gv, err := schema.ParseGroupVersion(apiVersion)
	assert.NilError(t, err)
	m, err := cl.Mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	assert.NilError(t, err)
	var u *unstructured.Unstructured
	if ns == "" {
		u, err = cl.Dynamic.Resource(m.Resource).Get(context.Background(), name, metav1.GetOptions{})
	} else {
		u, err = cl.Dynamic.Resource(m.Resource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	assert.NilError(t, err)
	return u
}

// secretView is the inventory Secret as stored, parsed without the
// package under test.
type secretView struct {
	Name            string
	ResourceVersion string
	Type            string
	Labels          map[string]string
	Metadata        map[string]any
	Index           []string
	Changes         map[string]storedChange
	Keys            []string
}

type storedChange struct {
	Module struct {
		Path, Version, Name string
	} `json:"module"`
	Values         *string `json:"values"`
	ManifestDigest string  `json:"manifestDigest"`
	Timestamp      string  `json:"timestamp"`
	Inventory      struct {
		Entries []inventory.Entry `json:"entries"`
	} `json:"inventory"`
	ForcedFrom []string `json:"forcedFrom"`
}

// secret reads the release's inventory Secret; nil when absent.
func secret(t *testing.T, rel *render.Release) *secretView {
	t.Helper()
	name := "opm." + rel.Name + "." + rel.ReleaseID
	s, err := cluster(t).Clientset.CoreV1().Secrets(rel.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	assert.NilError(t, err)
	v := &secretView{Name: s.Name, ResourceVersion: s.ResourceVersion, Type: string(s.Type), Labels: s.Labels, Changes: map[string]storedChange{}}
	for k := range s.Data {
		v.Keys = append(v.Keys, k)
	}
	slices.Sort(v.Keys)
	assert.NilError(t, json.Unmarshal(s.Data["metadata"], &v.Metadata))
	assert.NilError(t, json.Unmarshal(s.Data["index"], &v.Index))
	for _, id := range v.Index {
		var c storedChange
		assert.NilError(t, json.Unmarshal(s.Data[id], &c), "change %s", id)
		v.Changes[id] = c
	}
	return v
}

// latest lists the newest change's entries as "Kind/namespace/name@component", sorted.
func (s *secretView) latest() []string {
	return entryNames(s.Changes[s.Index[0]].Inventory.Entries)
}

func entryNames(es []inventory.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s/%s/%s@%s", e.Kind, e.Namespace, e.Name, e.Component))
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// names lists result objects as "Kind/name" (plus "=action" when set), sorted.
func names(objs []manifest.Change) []string {
	out := []string{}
	for _, o := range objs {
		s := o.Kind + "/" + o.Name
		if o.Action != "" {
			s += "=" + string(o.Action)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// clock returns a Now that advances a minute per call, so every write has
// a distinct timestamp.
func clock() func() time.Time {
	t := time.Date(2026, 2, 11, 14, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Minute)
		return t
	}
}

// removeFinalizers clears an object's finalizers when the test ends, so
// its namespace can go.
func removeFinalizers(t *testing.T, apiVersion, kind, ns, name string) {
	t.Cleanup(func() {
		cl := cluster(t)
		gv, _ := schema.ParseGroupVersion(apiVersion)
		m, err := cl.Mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
		if err != nil {
			t.Error(err)
			return
		}
		_, err = cl.Dynamic.Resource(m.Resource).Namespace(ns).Patch(context.Background(), name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

func pvc(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func crdDoc(group string) string {
	return crdWithSpec(group, "{type: object, properties: {size: {type: integer}}}")
}

// crdWithSpec is crdDoc's Widget CRD with the given schema (YAML flow
// style) for spec.
func crdWithSpec(group, spec string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: %[2]s
`, group, spec)
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	return unstructured.NestedSlice(obj, fields...)
}

// limitedCluster is a client for a user who may keep the inventory in
// relNS and apply ConfigMaps in production, but only read them in games.
func limitedCluster(t *testing.T, relNS, games, production string) *kube.Cluster {
	t.Helper()
	ctx := t.Context()
	admin := cluster(t).Clientset
	user := "limited-" + relNS
	grant := func(ns, resource string, verbs ...string) {
		name := "limited-" + resource
		_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: verbs}},
		}, metav1.CreateOptions{})
		assert.NilError(t, err)
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
		}, metav1.CreateOptions{})
		assert.NilError(t, err)
	}
	grant(relNS, "secrets", "get", "list", "create", "update")
	grant(production, "configmaps", "get", "list", "create", "update", "patch")
	grant(games, "configmaps", "get", "list")

	return impersonated(t, user, func(cl *kube.Cluster) error {
		if _, err := cl.Clientset.CoreV1().ConfigMaps(production).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		_, err := cl.Clientset.CoreV1().Secrets(relNS).List(ctx, metav1.ListOptions{})
		return err
	})
}

// impersonated is a client acting as user, returned once ready (a
// request user's new bindings allow) succeeds: the authorizer learns of
// new bindings through a watch, a moment after they are created.
func impersonated(t *testing.T, user string, ready func(*kube.Cluster) error) *kube.Cluster {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := kube.FromConfig(cfg, kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	kubetest.WaitFor(t, 10*time.Second, func() error { return ready(cl) })
	return cl
}
