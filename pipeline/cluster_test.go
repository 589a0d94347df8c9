package pipeline_test

import (
	"github.com/google/uuid"

	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
	"github.com/opmodel/pipeline/pipeline"
)

// Tests of what only a cluster with controllers shows: garbage collection
// of a pruned workload's dependents, namespaces that finish terminating,
// and a Service range wide enough for releases at the scale users run.

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config())
	assert.NilError(t, err)
	return cs
}

// eventually polls cond every 100ms for at most limit; cond says what it
// still waits for, "" when done.
func eventually(t *testing.T, limit time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		waiting := cond()
		if waiting == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Apply deletes pruned objects with background propagation: the
// Deployment goes at once and the garbage collector removes its
// ReplicaSets, which take their Pods with them.
func TestPruneLeavesNoReplicaSetOrPodBehind(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	dir := deploytest.Dir(t, ns, `withSecret: false`)
	ready := readyImage(t)
	applyDir(t, dir, ready)

	d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	assert.NilError(t, err)
	owned := map[types.UID]string{} // ReplicaSets and Pods of the Deployment
	eventually(t, time.Minute, func() string {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		for _, rs := range rss.Items {
			if metav1.IsControlledBy(&rs, d) {
				owned[rs.UID] = "replicaset/" + rs.Name
			}
		}
		running := 0
		for _, p := range pods.Items {
			for _, ref := range p.OwnerReferences {
				if _, ok := owned[ref.UID]; ok {
					owned[p.UID] = "pod/" + p.Name
					if p.Status.Phase == "Running" {
						running++
					}
				}
			}
		}
		if running == 0 {
			return "no running pod of deployment app"
		}
		return ""
	})

	renamed := deploytest.Values(t, `name: "site"`)
	res, err := pipeline.Apply(t.Context(), pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, ValuesFiles: []string{ready, renamed}}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	var pruned []string
	for _, o := range res.Releases[0].Pruned {
		pruned = append(pruned, o.Kind+"/"+o.Name)
	}
	assert.DeepEqual(t, pruned, []string{"Deployment/app", "Service/app"})

	eventually(t, time.Minute, func() string {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		var left []string
		for _, rs := range rss.Items {
			if name, ok := owned[rs.UID]; ok {
				left = append(left, name)
			}
		}
		for _, p := range pods.Items {
			if name, ok := owned[p.UID]; ok {
				left = append(left, name)
			}
		}
		if len(left) > 0 {
			return "left behind by the pruned deployment: " + strings.Join(left, ", ")
		}
		return ""
	})
}

// directRelease builds a release from YAML objects with the labels the
// catalog would give them, for what the catalog cannot render (here a
// Namespace). Its id is the one the seeds derive (UUIDv5 over
// "fqn:name:namespace"), as an inventory found by name is checked for.
func directRelease(t *testing.T, name, ns string, docs ...string) *render.Release {
	t.Helper()
	rel := &render.Release{
		Name: name, Namespace: ns,
		ReleaseID:  uuid.NewSHA1(uuid.MustParse("c1cbe76d-5687-5a47-bfe6-83b081b15413"), []byte("example.com/direct@v0#direct:"+name+":"+ns)).String(),
		Module:     render.Module{Path: "example.com/direct@v0", Name: "direct", Version: "0.1.0"},
		ValuesText: "{}",
	}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		assert.NilError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[manifest.LabelManagedBy] = manifest.ManagedByOPM
		labels[manifest.LabelReleaseName] = name
		labels[manifest.LabelReleaseUUID] = rel.ReleaseID
		u.SetLabels(labels)
		rel.Resources = append(rel.Resources, manifest.Resource{Object: u, Component: "app"})
	}
	manifest.Sort(rel.Resources)
	var err error
	rel.ManifestDigest, err = manifest.Digest(rel.Resources)
	assert.NilError(t, err)
	rel.ChangeID = manifest.ChangeID(rel.Module.Path, rel.Module.Version, rel.ValuesText, rel.ManifestDigest)
	return rel
}

// A release that owns a Namespace full of objects: delete with
// --prune-namespaces --wait returns once the namespace controller has
// emptied and removed it.
func TestDeleteWithPrunedNamespaceFinishes(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	ns := env.Namespace(t)
	data := ns + "-data"
	t.Cleanup(func() {
		_ = clientset(t).CoreV1().Namespaces().Delete(context.Background(), data, metav1.DeleteOptions{})
	})
	rel := directRelease(t, "stack", ns,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: "+data+"}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "+data+"}\ndata: {k: v}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "+ns+"}\ndata: {k: v}\n",
		`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: `+data+`}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: "`+kubetest.ReadyImage+`"}]
`)
	cl, err := kube.FromConfig(env.Config(), kubetest.ContextName, kube.Options{})
	assert.NilError(t, err)
	_, err = reconcile.Apply(t.Context(), cl, rel, reconcile.Options{})
	assert.NilError(t, err)
	// Objects the release does not own live in the namespace too: the
	// workload's ReplicaSet and Pods, the namespace's ServiceAccount.
	eventually(t, time.Minute, func() string {
		pods, err := clientset(t).CoreV1().Pods(data).List(t.Context(), metav1.ListOptions{})
		assert.NilError(t, err)
		if len(pods.Items) == 0 {
			return "no pods in " + data
		}
		return ""
	})

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := pipeline.Delete(ctx, pipeline.DeleteOptions{
		Target: pipeline.Target{Name: "stack", Namespace: ns}, ClusterOptions: cluster(t),
		Protection: pipeline.Protection{PruneNamespaces: true}, Wait: true,
	})
	assert.NilError(t, err, "after %s", time.Since(start))
	r := res.Releases[0]
	var deleted []string
	for _, o := range r.Deleted {
		deleted = append(deleted, o.Kind+"/"+o.Name)
	}
	slices.Sort(deleted)
	assert.DeepEqual(t, deleted, []string{"ConfigMap/settings", "ConfigMap/settings", "Deployment/web", "Namespace/" + data})
	assert.Check(t, r.Inventory.Deleted)
	_, err = clientset(t).CoreV1().Namespaces().Get(t.Context(), data, metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "namespace %s still there: %v", data, err)
}

// bigModule renders count components, each a Service, two ConfigMaps and
// a Secret: 1 000 objects, 250 of them Services, at the default count.
const bigModule = `package app

import (
	"list"
	core "github.com/opmodel/pipeline/catalog@v0"
)

core.#Module

metadata: {
	apiVersion: "test.example/deploy/app@v0"
	name:       "app"
	version:    "1.0.0"
}

#config: {
	count: *250 | int
}

#components: {
	for i in list.Range(0, #config.count, 1) {
		"c\(i)": {
			core.#Service
			core.#Configs
			core.#Secrets
			spec: {
				service: {name: "c\(i)", ports: http: {port: 80, targetPort: 8080}}
				configs: {
					"c\(i)-a": data: key: "a-\(i)"
					"c\(i)-b": data: key: "b-\(i)"
				}
				secrets: "c\(i)-s": data: password: "pw-\(i)"
			}
		}
	}
}
`

// A release at the scale users run: 1 000 objects with 250 Services
// (a /24 Service range ran out at about 250) apply, re-apply as unchanged
// and prune down to 40.
func TestThousandObjectRelease(t *testing.T) {
	ns := env.Namespace(t)
	dir := deploytest.Write(t, map[string]string{"app/app.cue": bigModule, "deploy.cue": deploytestRoot(ns)})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	apply := func(files ...string) pipeline.AppliedRelease {
		t.Helper()
		start := time.Now()
		res, err := pipeline.Apply(ctx, pipeline.ApplyOptions{Selection: pipeline.Selection{Dir: dir, ValuesFiles: files}, ClusterOptions: cluster(t)})
		assert.NilError(t, err)
		t.Logf("apply %v: %+v (%.1fs)", files, res.Releases[0].Counts, time.Since(start).Seconds())
		return res.Releases[0]
	}

	r := apply()
	assert.Equal(t, r.Counts, reconcile.Counts{Created: 1000})
	svcs, err := clientset(t).CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(svcs.Items), 250)
	for _, s := range svcs.Items {
		assert.Assert(t, s.Spec.ClusterIP != "" && s.Spec.ClusterIP != "None", "service %s has no cluster IP", s.Name)
	}

	r = apply()
	assert.Equal(t, r.Counts, reconcile.Counts{Unchanged: 1000})

	r = apply(deploytest.Values(t, `count: 10`))
	assert.Equal(t, r.Counts, reconcile.Counts{Unchanged: 40, Deleted: 960, Stale: 960})
	assert.Check(t, is.Len(r.Pruned, 960))
	left, err := clientset(t).CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(left.Items), 10)
}
