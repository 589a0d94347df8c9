package main

import (
	"encoding/json"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Someone's kubectl apply of an old manifest after the release's last
// apply: status still reads the release healthy at its change, and says
// what was written since, by whom; the board marks it. A new apply takes
// it back and the mark goes.
func TestStatusSaysWhatWasEditedSinceTheApply(t *testing.T) {
	ns := env.Namespace(t)
	dir := appInTest(t, ns, `stamp: "new"`)
	kc := "--kubeconfig=" + env.Kubeconfig
	code, out, errOut := runOpm(t, "apply", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	edited := func() []string {
		t.Helper()
		code, out, errOut := runOpm(t, "status", dir, "--env", "test", kc, "-o", "json")
		assert.Equal(t, code, 0, "%s%s", out, errOut)
		var st struct {
			Releases []struct{ EditedSince []string }
		}
		assert.NilError(t, json.Unmarshal([]byte(out), &st), out)
		return st.Releases[0].EditedSince
	}
	assert.Equal(t, len(edited()), 0)

	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "web-config", metav1.GetOptions{})
	assert.NilError(t, err)
	cm.Data["stamp"] = "old"
	_, err = cs.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-client-side-apply"})
	assert.NilError(t, err)
	got := edited()
	assert.Equal(t, len(got), 1, "%v", got)
	assert.Check(t, is.Contains(got[0], "ConfigMap/web-config: changed by kubectl-client-side-apply at "))
	code, out, errOut = runOpm(t, "status", dir, "--env", "test", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "Drift: what runs may not be change "), out)

	code, out, errOut = runOpm(t, "apply", dir, "--env", "test", kc, "--force-conflicts")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Equal(t, len(edited()), 0, "the apply took it back")
}
