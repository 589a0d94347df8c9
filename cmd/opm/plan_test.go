package main

import (
	"fmt"
	"maps"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/deploytest"
)

// A component rename changes the Deployment's immutable selector. Every
// object is dry-run first, so the apply fails before the Service (an
// earlier stage) is pointed at pods that do not exist: nothing changes.
// With --force the re-creation is announced and done.
func TestRefusedApplyChangesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dir := deploytest.Dir(t, ns, ``)
	code, _, errOut := runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	versions := func() map[string]string {
		out := map[string]string{}
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "app", metav1.GetOptions{})
		assert.NilError(t, err)
		out["service"] = svc.ResourceVersion
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "app-creds", metav1.GetOptions{})
		assert.NilError(t, err)
		out["secret"] = sec.ResourceVersion
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		assert.NilError(t, err)
		// Controllers keep writing the Deployment's status, which moves its
		// resourceVersion; what opm wrote is its generation (spec) and its
		// own managed-fields entry (labels, annotations and spec it owns).
		// The deployment controller adds its revision annotation when it
		// gets to it, maybe after the first snapshot: it is not opm's.
		ann := maps.Clone(dep.Annotations)
		delete(ann, "deployment.kubernetes.io/revision")
		out["deployment"] = fmt.Sprint(dep.Generation, dep.Labels, ann)
		for _, m := range dep.ManagedFields {
			if m.Manager == "opm" && m.Subresource == "" {
				out["deployment"] += " " + m.Time.String() + " " + string(m.FieldsV1.Raw)
			}
		}
		return out
	}
	before := versions()

	renamed := deploytest.Values(t, `component: "api"`, `secret: "changed"`)
	code, out, errOut := runOpm(t, "apply", "--no-wait", dir, "-f", renamed, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 2, out+errOut)
	assert.Check(t, is.Contains(errOut, "the server would refuse this apply"))
	assert.Check(t, is.Contains(errOut, "re-run with --force"))
	assert.DeepEqual(t, versions(), before)

	code, out, errOut = runOpm(t, "apply", "--no-wait", dir, "-f", renamed, "--kubeconfig", env.Kubeconfig, "--force")
	assert.Equal(t, code, 0, out+errOut)
	assert.Check(t, is.Contains(errOut, "Deployment.apps/"+ns+"/app will be deleted and re-created (--force): immutable spec.selector changed\n"), errOut)
	assert.Check(t, is.Contains(out, "deployment.apps/app recreated"))
}
