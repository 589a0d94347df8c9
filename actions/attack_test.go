package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/diff"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/internal/attacktest"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// The attacker reads the pull request, the job summaries, the drift issue,
// the Action's outputs and its log (as the runner shows it: the
// ::add-mask:: commands are consumed). The canary and the PIN come from
// the values-secret input, and reach a Secret, a ConfigMap (DSN, base64,
// upper case), a checksum annotation, an object name and a dotted key.
// Review, apply, a rotation, rollback, drift and smoke publish nothing that
// shows either value in any encoding, and no identifier against which any
// of the 10 000 PINs could be confirmed; also with the modules written for
// OPM's v2 line.
func TestAttackerLearnsNothingFromTheAction(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	for _, tc := range []struct {
		release string
		v2      bool // the modules written for OPM's v2 line
	}{{"attack", false}, {"pin", false}, {"attack", true}} {
		release := tc.release
		name := release
		if tc.v2 {
			name += "-v2"
		}
		t.Run(name, func(t *testing.T) {
			env := testCluster(t)
			b, err := os.ReadFile(env.Kubeconfig)
			assert.NilError(t, err)
			ns := env.Namespace(t)
			files := deploytest.AttackFiles(t, ns, deploytest.AttackInput, "", "")
			if tc.v2 {
				files = deploytest.AttackV2(files)
			}
			r := &repo{t: t, dir: deploytest.Write(t, files)}
			r.git("init", "-q", "-b", "main")
			r.base = r.commit("base: the secrets come from CI")
			r.git("checkout", "-q", "-b", "feature")
			r.commit2("README.md", "public change\n")

			h := newHarness(t, r, "pull_request", "pull_request.json")
			h.env["INPUT_PATH"] = "."
			h.env["INPUT_ENVIRONMENTS"] = "production"
			h.env["INPUT_RELEASES"] = release
			h.env["INPUT_KUBECONFIG"] = string(b)
			h.env["INPUT_SEAL_KEY"] = "seal-key-of-the-repo"
			h.env["INPUT_VALUES_SECRET"] = deploytest.AttackValues(deploytest.AttackCanary, deploytest.AttackPIN)

			var published strings.Builder
			run := func(mode, event string) {
				t.Helper()
				h.env["INPUT_MODE"], h.env["GITHUB_EVENT_NAME"] = mode, event
				err := h.run()
				assert.NilError(t, err, "mode %s", mode)
				outputs, rerr := os.ReadFile(h.env["GITHUB_OUTPUT"])
				assert.NilError(t, rerr)
				published.WriteString(logShown(h) + h.summary() + string(outputs))
			}
			run("review", "pull_request")
			run("apply", "push")
			firstChange := jsonMap(t, h.outputs()["change-ids"])[release+"/production"]
			assert.Assert(t, strings.HasPrefix(firstChange, manifest.SealedChangePrefix), firstChange)

			// The secret rotates in CI; a review shows the change.
			h.env["INPUT_VALUES_SECRET"] = deploytest.AttackValues(deploytest.AttackCanary2, deploytest.AttackPIN2)
			run("review", "pull_request")
			// A pull request that moves every object to another namespace
			// (each shown whole, added and stale), reviewed sharded:
			// the plan file and each shard's partial (artifacts anyone with
			// read access downloads), and the merge job's comment, summary
			// and outputs. Sharded reviews compare with git: no kubeconfig.
			deploy := readFile(t, r.dir+"/deploy.cue")
			assert.Assert(t, strings.Contains(deploy, "\tnamespace: \""+ns+"\"\n"))
			r.commit2("deploy.cue", strings.Replace(deploy, "\tnamespace: \""+ns+"\"\n", "\tnamespace: \""+ns+"-moved\"\n", 1))
			delete(h.env, "INPUT_KUBECONFIG")
			h.env["INPUT_REVIEW-TARGET"], h.env["INPUT_REVIEW-MAX-SHARDS"] = "1ms", "2"
			run("plan", "pull_request")
			assert.Equal(t, h.outputs()["review-shards"], "2")
			planFile := h.outputs()["review-plan-file"]
			published.WriteString(readFile(t, planFile))
			h.env["INPUT_PARTIALS-DIR"] = t.TempDir()
			var partials string
			for _, sh := range []string{"1/2", "2/2"} {
				h.env["INPUT_SHARD"], h.env["INPUT_REVIEW-PLAN-FILE"] = sh, planFile
				run("review", "pull_request")
				partials += readFile(t, h.outputs()["partial"])
			}
			assert.Assert(t, strings.Contains(partials, diff.MaskPrefix), "a partial shows the masked secret's diff: %s", partials)
			published.WriteString(partials)
			delete(h.env, "INPUT_SHARD")
			delete(h.env, "INPUT_REVIEW-PLAN-FILE")
			run("review", "pull_request")
			published.WriteString(readFile(t, h.outputs()["report"]))
			delete(h.env, "INPUT_PARTIALS-DIR")
			r.git("reset", "-q", "--hard", "HEAD~1")
			h.env["INPUT_KUBECONFIG"] = string(b)
			run("apply", "push")

			// Someone edits the ConfigMap on the cluster: drift reports it.
			cs, err := kubernetes.NewForConfig(env.Config)
			assert.NilError(t, err)
			name := map[string]string{"attack": "attack-config", "pin": "pin-config"}[release]
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
			assert.NilError(t, err)
			// A public field and the checksum a secret reaches.
			cm.Data[map[string]string{"attack": "jdbc", "pin": "purpose"}[release]] = "edited by hand"
			cm.Annotations[map[string]string{"attack": "checksum/secret", "pin": "checksum/pin"}[release]] = "edited by hand"
			_, err = cs.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
			assert.NilError(t, err)
			run("drift", "schedule")
			assert.Equal(t, h.outputs()["drifted"], "true")

			// Back to the first change, named as the outputs showed it;
			// the secret input is today's, so the digest differs.
			h.env["INPUT_ROLLBACK_TO"] = firstChange
			h.env["INPUT_ALLOW-DIFFERENT-DIGEST"] = "true"
			run("rollback", "push")
			run("smoke", "pull_request")

			for _, c := range h.srv.Comments(prNumber) {
				published.WriteString(c.Body)
			}
			for _, i := range h.srv.Issues() {
				published.WriteString(i.Title + i.Body)
				for _, c := range h.srv.Comments(i.Number) {
					published.WriteString(c.Body)
				}
			}
			text := published.String()
			assert.Assert(t, strings.Contains(text, "drift"), "the drift report is part of what is searched")
			assert.Assert(t, len(attacktest.Leaks(text)) == 0, "the Action publishes %v:\n%s", attacktest.Leaks(text), text)

			rels, err := render.Render(context.Background(), render.Options{Dir: r.dir, Environment: "production", Releases: []string{"pin"},
				Values: []values.Input{{Name: "values-secret", Data: []byte(deploytest.AttackValues(deploytest.AttackCanary, deploytest.AttackPIN)), Secret: true}}})
			assert.NilError(t, err)
			attacktest.BruteForcePIN(t, rels[0], text)
		})
	}
}

// commit2 writes one file and commits it.
func (r *repo) commit2(name, content string) string {
	r.t.Helper()
	assert.NilError(r.t, os.WriteFile(r.dir+"/"+name, []byte(content), 0o644))
	return r.commit("change " + name)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	assert.NilError(t, err)
	return string(b)
}
