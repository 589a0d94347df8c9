package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/kubetest"
)

// clusterRepo is a repository whose staging environment deploys into a
// namespace of the test's own, and the kubeconfig of the test cluster.
func clusterRepo(t *testing.T) (r *repo, ns string, kubeconfig string) {
	t.Helper()
	env := testCluster(t)
	ns = env.Namespace(t)
	b, err := os.ReadFile(env.Kubeconfig)
	assert.NilError(t, err)
	r = newRepo(t)
	r.edit("environments.cue", `namespace: "staging"`, `namespace: "`+ns+`"`)
	r.commit("staging deploys to the test namespace")
	return r, ns, string(b)
}

// kubeconfigMaterial lists what must never be written anywhere: every
// long value of the kubeconfig (server URL, certificates, keys, tokens).
func kubeconfigMaterial(t *testing.T, kubeconfig string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(kubeconfig, "\n") {
		if _, v, ok := strings.Cut(line, ": "); ok {
			if v = strings.Trim(strings.TrimSpace(v), `"`); len(v) >= 16 {
				out = append(out, v)
			}
		}
	}
	assert.Assert(t, len(out) >= 2, "the test kubeconfig has a server and credentials: %d values", len(out))
	return out
}

// checkNoKubeconfig fails if kubeconfig material is anywhere the Action
// writes: the log (outside the ::add-mask:: commands that hide it), the
// outputs, the summary, the comments, or a file in the workspace.
func checkNoKubeconfig(t *testing.T, h *harness, kubeconfig string) {
	t.Helper()
	material := kubeconfigMaterial(t, kubeconfig)
	var log []string
	masked := 0
	for _, line := range strings.Split(h.stdout.String(), "\n") {
		if strings.HasPrefix(line, "::add-mask::") {
			masked++
			continue
		}
		log = append(log, line)
	}
	assert.Assert(t, masked > 0, "kubeconfig values are masked for the runner")
	outputs, err := os.ReadFile(h.env["GITHUB_OUTPUT"])
	assert.NilError(t, err)
	places := map[string]string{"log": strings.Join(log, "\n"), "GITHUB_OUTPUT": string(outputs), "summary": h.summary()}
	for _, c := range h.srv.Comments(prNumber) {
		places["comment"] += c.Body
	}
	err = filepath.WalkDir(h.repo.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		places["workspace file "+p] = string(b)
		return err
	})
	assert.NilError(t, err)
	for where, text := range places {
		for _, m := range material {
			assert.Assert(t, !strings.Contains(text, m), "kubeconfig material %.20q… in the %s", m, where)
		}
	}
}

func TestReviewAgainstClusterKeepsKubeconfigSecret(t *testing.T) {
	r, ns, kubeconfig := clusterRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_KUBECONFIG"] = kubeconfig

	// production pins kubeContext "production", which the kubeconfig lacks:
	// an error row, while staging is still diffed.
	err := h.run()
	assert.ErrorContains(t, err, "2 of 4 releases could not be reviewed (blog/production, minecraft/production)")
	body := h.ours(prNumber)[0].Body
	checkBalanced(t, body)
	contains(t, body, "## opm diff: production, staging")
	contains(t, body, "Change ID (live → render)")
	contains(t, body, "| blog | production | production | | | | 🔌 unreachable |")
	contains(t, body, `"production"`)
	contains(t, body, "| blog | staging | "+ns+" | 5 | 0 | 0 | — → `change-sha1-")
	contains(t, body, "| minecraft | staging | "+ns+" |")
	out := h.outputs()
	assert.Equal(t, out["has-changes"], "true", "nothing is deployed yet")
	_, changeIDs := expectedRevisions(t, r, "staging")
	assert.DeepEqual(t, jsonMap(t, out["change-ids"]), changeIDs)
	checkNoKubeconfig(t, h, kubeconfig)

	// The context input overrides every environment's context.
	h.env["INPUT_CONTEXT"] = "opm-test"
	assert.NilError(t, h.run())
	body = h.ours(prNumber)[0].Body
	contains(t, body, "| blog | production | production | 5 | 0 | 0 | — → `change-sha1-")
	checkNoKubeconfig(t, h, kubeconfig)
}

func TestApplyMode(t *testing.T) {
	r, ns, kubeconfig := clusterRepo(t)
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	h.env["INPUT_KUBECONFIG"] = kubeconfig

	assert.NilError(t, h.run())
	out := h.outputs()
	digests, changeIDs := expectedRevisions(t, r, "staging")
	assert.DeepEqual(t, jsonMap(t, out["digests"]), digests)
	assert.DeepEqual(t, jsonMap(t, out["change-ids"]), changeIDs)
	assert.Equal(t, out["has-changes"], "true")
	assert.Equal(t, out["stale-count"], "0")
	assert.Equal(t, len(h.srv.Requests()), 0, "apply does not comment")
	log := h.stdout.String()
	contains(t, log, "::group::apply blog (staging)")
	contains(t, log, "::group::apply minecraft (staging)")
	contains(t, log, "::endgroup::")
	contains(t, log, "deployment.apps/web created")
	sum := h.summary()
	contains(t, sum, "## opm apply: staging")
	contains(t, sum, "| blog | staging | "+ns+" | `"+changeIDs["blog/staging"]+"` |")
	checkBalanced(t, sum)
	checkNoKubeconfig(t, h, kubeconfig)

	cs, err := kubernetes.NewForConfig(testCluster(t).Config)
	assert.NilError(t, err)
	deps, err := cs.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(deps.Items), 2, "blog's web and api are on the cluster")

	// Again: nothing to do.
	assert.NilError(t, h.run())
	assert.Equal(t, h.outputs()["has-changes"], "false")

	// Rename: the StatefulSet and Service are pruned, the PVC is kept.
	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename")
	assert.NilError(t, h.run())
	out = h.outputs()
	assert.Equal(t, out["has-changes"], "true")
	assert.Equal(t, out["stale-count"], "3")
	sum = h.summary()
	contains(t, sum, "PersistentVolumeClaim/"+ns+"/minecraft-data | server | skipped |")
	contains(t, sum, "StatefulSet.apps/"+ns+"/minecraft | server | deleted |")
	checkBalanced(t, sum)
	_, err = cs.AppsV1().StatefulSets(ns).Get(t.Context(), "minecraft", metav1.GetOptions{})
	assert.ErrorContains(t, err, "not found")
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), "minecraft-data", metav1.GetOptions{})
	assert.NilError(t, err, "the PVC is protected")
	checkNoKubeconfig(t, h, kubeconfig)
}

func TestApplyFailureFailsTheStep(t *testing.T) {
	r, _, kubeconfig := clusterRepo(t)
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_ENVIRONMENTS"] = "production" // its context is not in the kubeconfig
	h.env["INPUT_KUBECONFIG"] = kubeconfig
	err := h.run()
	assert.ErrorContains(t, err, "applying environment production")
	contains(t, h.summary(), "The apply failed")
	assert.Equal(t, h.outputs()["has-changes"], "false")
	checkBalanced(t, h.summary())
	checkNoKubeconfig(t, h, kubeconfig)
}

func TestRollbackMode(t *testing.T) {
	r, ns, kubeconfig := clusterRepo(t)
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	h.env["INPUT_RELEASES"] = "minecraft"
	h.env["INPUT_KUBECONFIG"] = kubeconfig
	assert.NilError(t, h.run())
	first := h.outputs()["change-ids"]

	r.edit("releases.cue", `name:       "minecraft"`, `name:       "minecraft-server"`)
	r.commit("rename")
	assert.NilError(t, h.run())
	assert.Assert(t, h.outputs()["change-ids"] != first)

	h.env["INPUT_MODE"] = "rollback"
	assert.ErrorContains(t, h.run(), "needs the rollback-to input")
	h.env["INPUT_ROLLBACK_TO"] = jsonMap(t, first)["minecraft/staging"]
	assert.NilError(t, h.run())
	assert.Equal(t, h.outputs()["change-ids"], first, "the first change is current again")
	sum := h.summary()
	contains(t, sum, "## opm rollback: staging")
	contains(t, sum, "Rolled back from `change-sha1-")
	contains(t, sum, "to `"+h.env["INPUT_ROLLBACK_TO"]+"`")
	contains(t, sum, "<sub>opm ")
	contains(t, h.stdout.String(), "::group::rollback minecraft (staging)")
	checkBalanced(t, sum)
	checkNoKubeconfig(t, h, kubeconfig)

	cs, err := kubernetes.NewForConfig(testCluster(t).Config)
	assert.NilError(t, err)
	_, err = cs.AppsV1().StatefulSets(ns).Get(t.Context(), "minecraft", metav1.GetOptions{})
	assert.NilError(t, err, "the StatefulSet of the first change is back")

	h.env["INPUT_ROLLBACK_TO"] = "change-sha1-00000000"
	assert.ErrorContains(t, h.run(), "it records: ")
}

// Drift mode against a real API server: an object edited by hand on the
// cluster opens the drift issue, an unreachable environment is reported
// (and fails the step unless continue-on-unreachable), and the issue is
// closed once an apply puts things back.
func TestDriftMode(t *testing.T) {
	r, ns, kubeconfig := clusterRepo(t)
	h := newHarness(t, r, "push", "push.json")
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	h.env["INPUT_KUBECONFIG"] = kubeconfig
	assert.NilError(t, h.run())

	cs, err := kubernetes.NewForConfig(testCluster(t).Config)
	assert.NilError(t, err)
	dep, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	assert.NilError(t, err)
	five := int32(5)
	dep.Spec.Replicas = &five
	_, err = cs.AppsV1().Deployments(ns).Update(t.Context(), dep, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	assert.NilError(t, err)

	h.env["GITHUB_EVENT_NAME"] = "schedule"
	h.env["INPUT_MODE"] = "drift"
	h.env["INPUT_ENVIRONMENTS"] = "" // every environment: production's context is missing
	err = h.run()
	assert.ErrorContains(t, err, "environments production are unreachable")
	out := h.outputs()
	assert.Equal(t, out["drifted"], "true")
	assert.Equal(t, out["drift-count"], "1")
	issues := h.srv.Issues()
	assert.Equal(t, len(issues), 1)
	issue := issues[0]
	assert.Equal(t, out["issue-url"], fmt.Sprintf("https://github.example/acme/deploy/issues/%d", issue.Number))
	assert.Equal(t, issue.Title, "opm drift in examples: production unreachable, staging drifted")
	for _, md := range []string{issue.Body, h.summary()} {
		contains(t, md, "## opm drift: production, staging")
		contains(t, md, "| production | 🔌 unreachable | 2 |")
		contains(t, md, "| staging | ⚠️ drifted | 2 | 0 | 1 | 0 | 0 |")
		contains(t, md, "~ modified <code>Deployment "+ns+"/web</code>")
		contains(t, md, "-  replicas: 5")
		contains(t, md, "<sub>opm ")
		checkBalanced(t, md)
	}
	contains(t, issue.Body, "<!-- opm:drift:examples -->")
	checkNoKubeconfig(t, h, kubeconfig)
	for _, place := range []string{issue.Body, h.summary()} {
		for _, m := range kubeconfigMaterial(t, kubeconfig) {
			assert.Assert(t, !strings.Contains(place, m))
		}
	}

	// Reported without failing; the same issue is updated.
	h.env["INPUT_CONTINUE-ON-UNREACHABLE"] = "true"
	assert.NilError(t, h.run())
	assert.Equal(t, len(h.srv.Issues()), 1)
	assert.Equal(t, h.outputs()["issue-url"], out["issue-url"])

	// apply puts the replicas back: staging matches, the issue is closed.
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	assert.NilError(t, h.run())
	h.env["INPUT_MODE"] = "drift"
	assert.NilError(t, h.run())
	out = h.outputs()
	assert.Equal(t, out["drifted"], "false")
	assert.Equal(t, out["drift-count"], "0")
	assert.Equal(t, out["issue-url"], "")
	closed := h.srv.Issues()[0]
	assert.Equal(t, closed.State, "closed")
	comments := h.srv.Comments(closed.Number)
	assert.Equal(t, len(comments), 1)
	contains(t, comments[0].Body, "Every environment matches the repository again")
	contains(t, h.summary(), "| staging | ✅ in sync | 2 | 0 | 0 | 0 | 0 |")
}

// A deploy job goes red in its own job on an image that never pulls: apply
// mode waits for health by default (timeout) and fails naming what the
// pods report.
func TestApplyModeWaitsForHealth(t *testing.T) {
	r, _, kubeconfig := clusterRepo(t)
	r.edit("releases.cue", `"ghcr.io/example/blog:1.4.2"`, `"`+kubetest.FailingImage+`"`)
	r.commit("an image that never pulls")
	h := newHarness(t, r, "push", "push.json")
	delete(h.env, "INPUT_WAIT")
	h.env["INPUT_MODE"] = "apply"
	h.env["INPUT_ENVIRONMENTS"] = "staging"
	h.env["INPUT_KUBECONFIG"] = kubeconfig
	h.env["INPUT_TIMEOUT"] = "20s"
	err := h.run()
	assert.ErrorContains(t, err, "applied, but not healthy after")
	assert.ErrorContains(t, err, "ImagePullBackOff")
	contains(t, h.stdout.String(), "waiting up to 20s for releases ")
}
