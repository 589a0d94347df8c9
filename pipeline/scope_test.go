package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
)

// gizmoCRD is a cluster-scoped kind installed outside any release, the way
// a platform team installs an operator's CRDs.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.scope.test.example}
spec:
  group: scope.test.example
  scope: Cluster
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// gizmoModule ships a Gizmo as a raw object (without its CRD, so the
// render cannot know its scope) next to a namespaced ConfigMap.
const gizmoModule = `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/deploy/app@v0", name: "app", version: "1.0.0"}

#config: {
	gizmo:     *true | bool
	gizmoName: string
}

#components: gadgets: {
	core.#Objects
	spec: objects: [
		if #config.gizmo {apiVersion: "scope.test.example/v1", kind: "Gizmo", metadata: name: #config.gizmoName, spec: size: 3},
		{apiVersion: "v1", kind: "ConfigMap", metadata: name: "gadgets", data: a: "b"},
	]
}
`

var (
	crds   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gizmos = schema.GroupVersionResource{Group: "scope.test.example", Version: "v1", Resource: "gizmos"}
)

func installGizmoCRD(t *testing.T) {
	t.Helper()
	u := &unstructured.Unstructured{}
	assert.NilError(t, yaml.Unmarshal([]byte(gizmoCRD), &u.Object))
	dc := dynamic.NewForConfigOrDie(env.Config())
	_, err := dc.Resource(crds).Apply(t.Context(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "platform-team", Force: true})
	assert.NilError(t, err)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		_, err := dc.Resource(gizmos).List(t.Context(), metav1.ListOptions{Limit: 1})
		if err != nil {
			return poll.Continue("gizmos not served yet: %v", err)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

// A custom resource of a cluster-scoped CRD the release does not ship
// renders with the release namespace (the render cannot know better), but
// the cluster decides at apply time: it is applied, recorded, diffed and
// pruned without a namespace, so the inventory, the digest and the diff
// describe what the API server stores.
func TestClusterDecidesScopeOfRawObjects(t *testing.T) {
	ns := env.Namespace(t)
	installGizmoCRD(t)
	name := "gizmo-" + ns
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(env.Config()).Resource(gizmos).Delete(t.Context(), name, metav1.DeleteOptions{})
	})
	dir := deploytest.Write(t, map[string]string{"app/app.cue": gizmoModule, "deploy.cue": deploytestRoot(ns)})
	values := deploytest.Values(t, `gizmoName: "`+name+`"`)

	// The premise: without a cluster, the Gizmo is rendered namespaced.
	rels, err := render.Render(t.Context(), render.Options{Dir: dir, ValuesFiles: []string{values}})
	assert.NilError(t, err)
	rendered := rels[0]
	var gizmoNS = "unrendered"
	for _, r := range rendered.Resources {
		if r.Object.GetKind() == "Gizmo" {
			gizmoNS = r.Object.GetNamespace()
		}
	}
	assert.Equal(t, gizmoNS, ns)

	opts := applyOpts(dir, values)
	var lines []string
	opts.Progress = func(e pipeline.ProgressEvent) { lines = append(lines, e.Line()) }
	res, err := pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Check(t, is.Contains(lines, "gizmo.scope.test.example/"+name+" created"))
	ar := res.Releases[0]
	assert.Check(t, is.Len(ar.Warnings, 1))
	assert.Check(t, len(ar.Warnings) == 1 && strings.Contains(ar.Warnings[0], "serves Gizmo as cluster-scoped"), "warnings: %v", ar.Warnings)
	for _, o := range ar.Applied {
		if o.Kind == "Gizmo" {
			assert.Check(t, is.Equal(o.Namespace, ""), "applied %+v", o)
		}
	}
	// The digest describes what was applied, not the first render.
	assert.Check(t, ar.ManifestDigest != rendered.ManifestDigest)
	live, err := dynamic.NewForConfigOrDie(env.Config()).Resource(gizmos).Get(t.Context(), name, metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(live.GetNamespace(), ""))

	// Right after: nothing to change, no ghost (a namespaced identity would
	// show a create plus a ghost), and the recorded digest is the head's.
	cs, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: pipeline.Selection{Dir: dir, ValuesFiles: []string{values}}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Check(t, !cs.Counts.Changed(), "diff right after apply: %+v", cs.Releases[0].Objects)
	assert.Check(t, is.Equal(cs.Counts.Ghost, 0))
	rc := cs.Releases[0]
	assert.Assert(t, rc.Base != nil)
	assert.Check(t, is.Equal(rc.Base.ManifestDigest, rc.Head.ManifestDigest))
	assert.Check(t, is.Equal(rc.Head.ManifestDigest, ar.ManifestDigest))

	// Status finds it where it is, and no ghost.
	st, err := pipeline.Status(t.Context(), pipeline.StatusOptions{Target: pipeline.Target{Selection: pipeline.Selection{Dir: dir, ValuesFiles: []string{values}}}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Check(t, is.Len(st.Releases[0].Ghosts, 0))
	var found []string
	for _, c := range st.Releases[0].Components {
		for _, o := range c.Objects {
			if o.Kind == "Gizmo" {
				found = append(found, o.Namespace+"/"+o.Name+"="+string(o.Health))
			}
		}
	}
	assert.Check(t, is.DeepEqual(found, []string{"/" + name + "=Current"}))

	// Dropping it prunes the cluster-scoped object it recorded.
	lines = nil
	opts = applyOpts(dir, values, deploytest.Values(t, "gizmo: false"))
	opts.Progress = func(e pipeline.ProgressEvent) { lines = append(lines, e.Line()) }
	_, err = pipeline.Apply(t.Context(), opts)
	assert.NilError(t, err)
	assert.Check(t, is.Contains(lines, "gizmo.scope.test.example/"+name+" deleted"))
	_, err = dynamic.NewForConfigOrDie(env.Config()).Resource(gizmos).Get(t.Context(), name, metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "gizmo still there: %v", err)
}
