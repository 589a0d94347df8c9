package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/internal/kubetest"
)

// The week's three services: an API with an autoscaler and a disruption
// budget, a worker, and a CronJob.
const (
	weekAPI = `package api

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/week/api@v0", name: "api", version: "1.0.0"}

#config: {
	image!:  string
	level:   *"info" | string
	memory!: string
}

#components: api: {
	core.#Workload
	core.#Service
	core.#DisruptionBudget
	core.#Autoscaling
	spec: {
		workload: {
			type:     "stateless"
			replicas: 1
			container: {
				image: #config.image
				ports: http: containerPort: 8080
				env: LOG_LEVEL: #config.level
				resources: requests: {cpu: "10m", memory: #config.memory}
			}
		}
		service: ports: http: {port: 80, targetPort: 8080}
		disruptionBudget: maxUnavailable: 1
		autoscaling: {minReplicas: 1, maxReplicas: 3, cpu: 70}
	}
}
`
	weekWorker = `package worker

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/week/worker@v0", name: "worker", version: "1.0.0"}

#config: image!: string

#components: worker: {
	core.#Workload
	spec: workload: {type: "stateless", replicas: 1, container: image: #config.image}
}
`
	weekCron = `package cron

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {apiVersion: "test.example/week/cron@v0", name: "cron", version: "1.0.0"}

#config: image!: string

#components: report: {
	core.#Workload
	spec: workload: {type: "scheduled-task", schedule: "0 3 * * *", container: {image: #config.image, command: ["true"]}}
}
`
)

// A platform team's week, from the docs alone, as one test on the local
// cluster (controllers, scheduler, simulated nodes): dev → qa →
// production (a canary with a soak, then eu and us), three services, each
// environment applied by its own tenant identity (opm rbac --bootstrap),
// from an Actions-like environment. Commit A everywhere; B changes only
// the API; C's API image never pulls, and its deploy job goes red itself;
// a bad quantity is traced to its values file; D fixes it and reaches
// production; then, in the incident, the red button takes production back
// to B although the worker and the CronJob did not change at B.
func TestAWeekOfAFleet(t *testing.T) {
	t.Parallel() // mostly waiting, in namespaces of its own: see TestMain
	// The deploy job's GitHub Actions environment, given to this test's
	// commands alone (withEnv): the process's stays as it is.
	ci := map[string]string{"GITHUB_ACTOR": "octocat", "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "shop/deploy", "GITHUB_RUN_ID": "1001"}
	jobCtx := withEnv(t.Context(), func(k string) string {
		if v, ok := ci[k]; ok {
			return v
		}
		return os.Getenv(k)
	})
	job := func(args ...string) (int, string, string) { return runOpmIn(jobCtx, args...) }
	base := env.Namespace(t)
	envs := []string{"dev", "qa", "canary", "eu", "us"}
	ns := map[string]string{}
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	var decl strings.Builder
	// The canary must stay healthy 15s before eu and us follow.
	after := map[string]string{"qa": `after: ["dev"]`, "canary": `after: ["qa"], soak: "15s"`, "eu": `after: ["canary"]`, "us": `after: ["canary"]`}
	group := map[string]string{"dev": "pre", "qa": "pre", "canary": "production", "eu": "production", "us": "production"}
	for _, e := range envs {
		ns[e] = base + "-" + e
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns[e], metav1.DeleteOptions{}) })
		fmt.Fprintf(&decl, "environments: %s: {namespace: %q, group: %q, cluster: impersonate: serviceAccount: \"%s/deployer\", rollout: {%s}}\n", e, ns[e], group[e], ns[e], after[e])
	}
	dir := deploytest.Write(t, map[string]string{
		"api/api.cue": weekAPI, "worker/worker.cue": weekWorker, "cron/cron.cue": weekCron,
		"deploy.cue": `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	apimodule "test.example/deploy/api"
	workermodule "test.example/deploy/worker"
	cronmodule "test.example/deploy/cron"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

` + decl.String() + `
releases: api: {#module: apimodule, values: image: "` + kubetest.ReadyImage + `"}
releases: worker: {#module: workermodule, values: image: "` + kubetest.ReadyImage + `"}
releases: cron: {#module: cronmodule, values: image: "` + kubetest.JobImage + `"}
`,
		// The API's values the team edits, in a file of their own.
		"api-values.cue": "package deploy\n\nreleases: api: values: {\n\tlevel:  \"info\"\n\tmemory: \"64Mi\"\n}\n",
	})
	gitRepo(t, dir, "A: three services")
	commitA := gitIn(t, dir, "rev-parse", "HEAD")
	kc := "--kubeconfig=" + env.Kubeconfig

	// Monday: the platform team bootstraps each tenant as an
	// administrator, then every apply runs as the environment's identity.
	for _, e := range envs {
		code, out, errOut := job("rbac", dir, "--env", e, "--bootstrap", kc)
		assert.Equal(t, code, 0, errOut)
		applyAsAdmin(t, out)
	}
	for _, e := range envs {
		deployer := "system:serviceaccount:" + ns[e] + ":deployer"
		kubetest.WaitUntilAllowed(t, cs, deployer, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns[e], "system:authenticated"}, "list", "", "secrets", ns[e], "")
	}
	user := "system:serviceaccount:" + ns["canary"] + ":deployer"
	assert.Check(t, !kubetest.CanI(t, cs, user, []string{"system:serviceaccounts", "system:authenticated"}, "create", "", "secrets", ns["eu"], ""), "canary's identity must not write eu")

	// Commit A, group by group: each wave waits for health, eu and us
	// wait out the canary's soak, which an HPA without metrics
	// (ScalingActive=False after its first sync) must not restart.
	code, out, errOut := job("apply", dir, "--group", "pre", kc, "--timeout", "2m")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	code, out, errOut = job("apply", dir, "--group", "production", kc, "--timeout", "2m")
	assert.Equal(t, code, 0, "the production rollout refused its own next wave: %s%s", out, errOut)
	assert.Check(t, strings.Contains(errOut, "environment canary: healthy; soaking for 15s"), errOut)

	// The HPA's condition flips after the canary became healthy; the
	// health clock (status's since) does not move with it.
	since := releaseSince(t, dir, "canary", "api")
	flip := waitHPACondition(t, ns["canary"], "api", "ScalingActive")
	assert.Assert(t, flip.After(since), "the HPA's condition (%s) came before the API was healthy (%s)", flip, since)
	assert.Equal(t, releaseSince(t, dir, "canary", "api"), since, "an HPA condition restarted the health clock")
	// An autoscaler scales the API up during the soak (through the scale
	// subresource, as an HPA does): its Deployment's Available dips and
	// returns, and the health clock does not move with it.
	scaleUp(t, ns["canary"], "api", 3)
	assert.Equal(t, releaseSince(t, dir, "canary", "api"), since, "a scale-up restarted the health clock")

	// Tuesday: B changes the API only. Production follows after the soak.
	editFile(t, filepath.Join(dir, "api-values.cue"), `level:  "info"`, `level:  "debug"`)
	gitIn(t, dir, "commit", "-qam", "B: debug logs")
	commitB := gitIn(t, dir, "rev-parse", "HEAD")
	for _, g := range []string{"pre", "production"} {
		code, out, errOut = job("apply", dir, "--group", g, kc, "--timeout", "2m")
		assert.Equal(t, code, 0, "%s%s", out, errOut)
	}
	// A no-op re-apply (what a gate's advice used to say) keeps the clock.
	since = releaseSince(t, dir, "canary", "worker")
	code, out, errOut = job("apply", dir, "--env", "canary", kc, "--timeout", "2m")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	assert.Equal(t, releaseSince(t, dir, "canary", "worker"), since, "a no-op re-apply restarted the health clock")

	// Wednesday: C's API image never pulls. dev's deploy job goes red
	// itself, within its timeout, naming the pod's reason; its next: line
	// rolls back the API alone, to the change it ran before.
	editFile(t, filepath.Join(dir, "deploy.cue"), `releases: api: {#module: apimodule, values: image: "`+kubetest.ReadyImage+`"}`, `releases: api: {#module: apimodule, values: image: "`+kubetest.FailingImage+`"}`)
	gitIn(t, dir, "commit", "-qam", "C: a new API image")
	start := time.Now()
	code, out, errOut = job("apply", dir, "--env", "dev", kc, "--timeout", "45s")
	assert.Assert(t, code != 0, "an image that never pulls went green: %s%s", out, errOut)
	assert.Assert(t, time.Since(start) < 2*time.Minute, "took %s", time.Since(start))
	assert.Check(t, regexp.MustCompile(`ErrImagePull|ImagePullBackOff`).MatchString(errOut), "the pods' reason is not named:\n%s", errOut)
	assert.Check(t, strings.Contains(errOut, "environment dev"), errOut)
	// Its next: rolls back the API alone, to the change it ran at B.
	assert.Check(t, strings.Contains(errOut, "next: opm rollback api "+dir+" --env dev --to change-"), errOut)
	assert.Check(t, !strings.Contains(errOut, "opm rollback worker"), "the worker did not change: %s", errOut)
	// qa's gate holds C back: dev does not run it healthy.
	code, out, errOut = job("apply", dir, "--env", "qa", kc)
	assert.Equal(t, code, 8, "%s%s", out, errOut)
	assert.Check(t, strings.Contains(errOut, "is not healthy"), errOut)
	// dev runs C already: applying it there again would change nothing,
	// so the next step says why and offers back or forward.
	assert.Check(t, !strings.Contains(errOut, "next: opm apply "+dir+" --env dev"), "the gate's next step re-applies the broken change: %s", errOut)
	assert.Check(t, strings.Contains(errOut, "next: opm status "+dir+" --env dev   # why it is not healthy; then roll dev back"), errOut)

	// Thursday: a bad quantity is refused with the value's file and line.
	editFile(t, filepath.Join(dir, "api-values.cue"), `memory: "64Mi"`, `memory: "64 Mi"`)
	code, out, errOut = job("apply", dir, "--env", "dev", kc, "--no-wait")
	assert.Assert(t, code != 0, "%s%s", out, errOut)
	assert.Check(t, strings.Contains(errOut, "api-values.cue:5"), "the refusal does not name the values file and line:\n%s", errOut)
	editFile(t, filepath.Join(dir, "api-values.cue"), `memory: "64 Mi"`, `memory: "64Mi"`)

	// Friday: D fixes the image and reaches production.
	editFile(t, filepath.Join(dir, "deploy.cue"), kubetest.FailingImage, kubetest.ReadyImage)
	editFile(t, filepath.Join(dir, "api-values.cue"), `level:  "debug"`, `level:  "warn"`)
	gitIn(t, dir, "commit", "-qam", "D: fix the image")
	commitD := gitIn(t, dir, "rev-parse", "HEAD")
	for _, g := range []string{"pre", "production"} {
		code, out, errOut = job("apply", dir, "--group", g, kc, "--timeout", "2m")
		assert.Equal(t, code, 0, "%s%s", out, errOut)
	}
	board := statusBoard(t, dir, kc)
	assert.Check(t, hasRow(board, "eu", "api", commitD[:12]), board)

	// The incident: production back to B, the last wave first. The worker
	// and the CronJob run the change they ran at B (first applied at A,
	// seen at B and D): they are already there, and stay at D's sighting.
	code, out, errOut = job("rollback", dir, "--group", "production", "--to", commitB[:10], kc, "--timeout", "2m")
	assert.Equal(t, code, 0, "the red button was refused: %s%s", out, errOut)
	board = statusBoard(t, dir, kc)
	for _, e := range []string{"canary", "eu", "us"} {
		assert.Check(t, hasRow(board, e, "api", commitB[:12]), "%s:\n%s", e, board)
		assert.Check(t, hasRow(board, e, "worker", commitD[:12]), "%s:\n%s", e, board)
	}
	assert.Check(t, hasRow(board, "qa", "api", commitD[:12]), board)

	// History says who applied what, and when each change first ran: the
	// worker's change was first applied at A by octocat from the run, and
	// seen at B and D since.
	code, out, errOut = job("history", "worker", dir, "--env", "eu", kc, "-o", "json")
	assert.Equal(t, code, 0, errOut)
	var h struct {
		Releases []struct {
			Changes []struct {
				First struct {
					Commit string `json:"commit"`
					Actor  string `json:"actor"`
					RunURL string `json:"runUrl"`
				} `json:"first"`
				Seen []struct {
					Commit string `json:"commit"`
				} `json:"seen"`
			} `json:"changes"`
		} `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &h), out)
	assert.Equal(t, len(h.Releases[0].Changes), 1, "the worker never changed:\n%s", out)
	c := h.Releases[0].Changes[0]
	assert.Equal(t, c.First.Commit, commitA, out)
	assert.Equal(t, c.First.Actor, "octocat")
	assert.Equal(t, c.First.RunURL, "https://github.example/shop/deploy/actions/runs/1001")
	var seen []string
	for _, s := range c.Seen {
		seen = append(seen, s.Commit)
	}
	assert.Check(t, strings.Contains(strings.Join(seen, " "), commitB) && strings.Contains(strings.Join(seen, " "), commitD), "seen at %v", seen)
	code, out, errOut = job("history", "worker", dir, "--env", "eu", kc)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "octocat"), out)
}

// applyAsAdmin creates what `opm rbac` printed, in its order, as an
// administrator's kubectl apply -f - would.
func applyAsAdmin(t *testing.T, stream string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	assert.NilError(t, err)
	// Each release's part of the stream puts its Namespace and
	// ServiceAccount first: a second copy is already there.
	made := map[string]bool{}
	for _, doc := range strings.Split(stream, "\n---\n") {
		u := &unstructured.Unstructured{}
		assert.NilError(t, yaml.Unmarshal([]byte(doc), &u.Object), doc)
		if len(u.Object) == 0 {
			continue // comments only
		}
		gvk := u.GroupVersionKind()
		key := gvk.Kind + "/" + u.GetNamespace() + "/" + u.GetName()
		if made[key] {
			continue
		}
		made[key] = true
		resource := strings.ToLower(gvk.Kind) + "s"
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource}
		if ns := u.GetNamespace(); ns != "" {
			_, err = dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
		} else {
			_, err = dyn.Resource(gvr).Create(t.Context(), u, metav1.CreateOptions{})
			if gvk.Kind != "Namespace" {
				t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
			}
		}
		assert.NilError(t, err, "creating %s %s", gvk.Kind, u.GetName())
	}
}

// releaseSince is when status says a release became healthy.
func releaseSince(t *testing.T, dir, envName, release string) time.Time {
	t.Helper()
	code, out, errOut := runOpm(t, "status", dir, "--env", envName, "--release", release, "--kubeconfig", env.Kubeconfig, "-o", "json")
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	var st struct {
		Releases []struct {
			Since string `json:"since"`
		} `json:"releases"`
	}
	assert.NilError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, len(st.Releases), 1, out)
	since, err := time.Parse(time.RFC3339, st.Releases[0].Since)
	assert.NilError(t, err, out)
	return since
}

// waitHPACondition waits until the HPA has the condition and returns
// when it last changed.
func waitHPACondition(t *testing.T, ns, name, cond string) time.Time {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	var at time.Time
	kubetest.WaitFor(t, 2*time.Minute, func() error {
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range hpa.Status.Conditions {
			if c.Type == autoscalingv2.HorizontalPodAutoscalerConditionType(cond) {
				at = c.LastTransitionTime.Time
				return nil
			}
		}
		return fmt.Errorf("HPA %s/%s has no %s condition yet: %v", ns, name, cond, hpa.Status.Conditions)
	})
	return at
}

// scaleUp scales a Deployment through its scale subresource, as an HPA
// does, and waits until its Available condition has dipped and returned
// (its lastTransitionTime after the scale) with every replica ready.
func scaleUp(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	sc, err := cs.AppsV1().Deployments(ns).GetScale(t.Context(), name, metav1.GetOptions{})
	assert.NilError(t, err)
	before := time.Now().Add(-time.Second) // transition times have second precision
	sc.Spec.Replicas = replicas
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(t.Context(), name, sc, metav1.UpdateOptions{FieldManager: "horizontal-pod-autoscaler"})
	assert.NilError(t, err)
	kubetest.WaitFor(t, 2*time.Minute, func() error {
		d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == "Available" && c.Status == "True" && !c.LastTransitionTime.Time.Before(before) && d.Status.ReadyReplicas == replicas {
				return nil
			}
		}
		return fmt.Errorf("deployment %s/%s: %d of %d ready, conditions %v: Available has not dipped and returned since the scale", ns, name, d.Status.ReadyReplicas, replicas, d.Status.Conditions)
	})
}

// statusBoard is the fleet board of every environment, as a text table:
// environment, release, commit, ….
func statusBoard(t *testing.T, dir, kc string) string {
	t.Helper()
	code, out, errOut := runOpm(t, "status", dir, "--env", "pre,production", kc)
	assert.Equal(t, code, 0, "%s%s", out, errOut)
	return out
}
