package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// buildOpm compiles this command, so tests can run real concurrent
// processes (and kill them).
func buildOpm(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "opm")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	assert.NilError(t, err, string(out))
	return bin
}

// proc is one started opm process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	code           int
	ended          time.Time
}

func startOpm(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	assert.NilError(t, p.cmd.Start())
	return p
}

func (p *proc) wait() {
	err := p.cmd.Wait()
	p.ended = time.Now()
	p.code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		p.code = ee.ExitCode()
	} else if err != nil {
		p.code = -1
	}
}

// releaseObjects lists what carries the release's id in ns (Secrets,
// Services, Deployments), minus the inventory Secret: "Kind/name".
func releaseObjects(t *testing.T, cs kubernetes.Interface, ns, releaseID string) []string {
	t.Helper()
	ctx := t.Context()
	sel := metav1.ListOptions{LabelSelector: manifest.LabelReleaseUUID + "=" + releaseID}
	var out []string
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
	assert.NilError(t, err)
	for _, s := range secrets.Items {
		if s.Labels[inventory.LabelComponent] != inventory.ComponentInventory {
			out = append(out, "Secret/"+s.Name)
		}
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, sel)
	assert.NilError(t, err)
	for _, s := range svcs.Items {
		out = append(out, "Service/"+s.Name)
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	assert.NilError(t, err)
	for _, d := range deps.Items {
		assert.Assert(t, d.DeletionTimestamp == nil, "%s is terminating", d.Name)
		out = append(out, "Deployment/"+d.Name)
	}
	slices.Sort(out)
	return out
}

// recorded is the inventory's latest change: "Kind/name".
func recorded(t *testing.T, cs kubernetes.Interface, ns string) (string, []string) {
	t.Helper()
	list, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentInventory})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Items), 1)
	inv, err := inventory.Decode(&list.Items[0])
	assert.NilError(t, err)
	// Whichever run wrote last, its change is sealed: the next skip may
	// trust it, and only it.
	_, latest, ok := inv.Latest()
	assert.Assert(t, ok)
	assert.Assert(t, latest.Sealed(), "the newest change is not sealed: objects=%d entriesDigest=%q", latest.Objects, latest.EntriesDigest)
	var out []string
	for _, e := range inv.LatestEntries() {
		out = append(out, e.Kind+"/"+e.Name)
	}
	slices.Sort(out)
	return inv.Release.ReleaseID, out
}

// Two applies of one release with different renders, started together,
// ten rounds: the lock serialises them, so the last to finish wins
// cleanly — what it rendered is exactly what exists and is recorded, no
// ghosts, nothing it recorded deleted — and the one that waited said who
// held the lock.
func TestConcurrentAppliesAreSerialised(t *testing.T) {
	bin := buildOpm(t)
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, ``)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	names := []string{"blue", "green"}
	files := []string{deploytest.Values(t, `name: "blue"`), deploytest.Values(t, `name: "green"`)}
	waits := 0
	for round := range 10 {
		ps := make([]*proc, 2)
		var wg sync.WaitGroup
		for i := range ps {
			ps[i] = startOpm(t, bin, "apply", "--no-wait", dir, "-f", files[i], "--kubeconfig", env.Kubeconfig,
				"--lock-holder", fmt.Sprintf("round-%d-%s", round, names[i]), "--lock-lease-duration", "3s")
			wg.Add(1)
			go func() { defer wg.Done(); ps[i].wait() }()
		}
		wg.Wait()
		for i, p := range ps {
			assert.Equal(t, p.code, 0, "round %d %s: %s%s", round, names[i], p.stdout.String(), p.stderr.String())
			if strings.Contains(p.stderr.String(), "waiting for the release lock") {
				waits++
				assert.Check(t, is.Contains(p.stderr.String(), fmt.Sprintf("held by round-%d-%s since", round, names[1-i])))
			}
		}
		lastOneWins(t, cs, ns, names, ps)
	}
	t.Logf("%d of 10 rounds had one apply wait for the other", waits)
	assert.Assert(t, waits > 0, "the applies never overlapped, so the lock was never exercised")
	_, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), "opm.app."+mustReleaseID(t, cs, ns), metav1.GetOptions{})
	assert.Assert(t, apierrors.IsNotFound(err), "the lock is released at the end: %v", err)
}

// lastOneWins checks that the inventory and the cluster agree and hold
// the objects of whichever of the two racing applies ended last.
func lastOneWins(t *testing.T, cs kubernetes.Interface, ns string, names []string, ps []*proc) {
	t.Helper()
	last := 0
	if ps[1].ended.After(ps[0].ended) {
		last = 1
	}
	want := []string{"Deployment/" + names[last], "Secret/" + names[last] + "-creds", "Service/" + names[last]}
	id, got := recorded(t, cs, ns)
	assert.DeepEqual(t, got, want)
	assert.DeepEqual(t, releaseObjects(t, cs, ns, id), want)
}

func mustReleaseID(t *testing.T, cs kubernetes.Interface, ns string) string {
	id, _ := recorded(t, cs, ns)
	return id
}

// An apply killed while it holds the lock stops renewing it; the next
// apply waits at most about one lease duration, names the dead holder,
// says it took the lock over, and succeeds.
func TestKilledHolderLockExpires(t *testing.T) {
	bin := buildOpm(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dir := deploytest.Dir(t, ns, ``)
	code, _, errOut := runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)

	// A finalizer keeps the Deployment from going, so an apply that
	// re-creates it (a component rename changes its immutable selector)
	// waits inside the lock until we kill it.
	const fin = "test.opmodel.dev/hold"
	_, err := cs.AppsV1().Deployments(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+fin+`"]}}`), metav1.PatchOptions{})
	assert.NilError(t, err)
	renamed := deploytest.Values(t, `component: "api"`)
	lease := "--lock-lease-duration=2s"
	victim := startOpm(t, bin, "apply", "--no-wait", dir, "-f", renamed, "--force", "--kubeconfig", env.Kubeconfig, "--lock-holder", "doomed-run", lease)
	deadline := time.Now().Add(60 * time.Second)
	for {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		assert.NilError(t, err)
		if d.DeletionTimestamp != nil {
			break
		}
		assert.Assert(t, time.Now().Before(deadline), "the apply never started re-creating the Deployment: %s%s", victim.stdout.String(), victim.stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
	leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	assert.NilError(t, err)
	assert.Equal(t, len(leases.Items), 1)
	assert.Equal(t, *leases.Items[0].Spec.HolderIdentity, "doomed-run")
	assert.NilError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	victim.wait()
	_, err = cs.AppsV1().Deployments(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	assert.NilError(t, err)
	killedAt := time.Now()

	next := startOpm(t, bin, "apply", "--no-wait", dir, "-f", renamed, "--force", "--kubeconfig", env.Kubeconfig, "--lock-holder", "next-run", lease)
	next.wait()
	took := time.Since(killedAt)
	assert.Equal(t, next.code, 0, next.stdout.String()+next.stderr.String())
	assert.Check(t, is.Contains(next.stderr.String(), "held by doomed-run since"))
	assert.Check(t, is.Contains(next.stderr.String(), "took over the release lock (Lease "+ns+"/"+leases.Items[0].Name+") from doomed-run since"), next.stderr.String())
	// It went ahead once the dead run's Lease expired (the message names
	// it); how long that took is the machine's business, not an assertion.
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Equal(t, d.Spec.Selector.MatchLabels["app.kubernetes.io/name"], "api")
	t.Logf("the next apply took %s after the kill (lease 2s)", took)
}

// A lock another run holds: --lock-timeout 0 fails at once with exit 6,
// naming the holder and how to break it; `opm unlock` breaks it.
func TestLockTimeoutAndUnlock(t *testing.T) {
	ns := env.Namespace(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dir := deploytest.Dir(t, ns, ``)
	code, _, errOut := runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	id, _ := recorded(t, cs, ns)
	name := "opm.app." + id

	// Hold it as another run would.
	holder, secs, now := "https://github.com/acme/deploy/actions/runs/42", int32(600), metav1.NewMicroTime(time.Now())
	lease := map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]string{
			manifest.LabelManagedBy: manifest.ManagedByOPM, manifest.LabelReleaseName: "app", manifest.LabelReleaseUUID: id, inventory.LabelComponent: "lock"}},
		"spec": map[string]any{"holderIdentity": holder, "leaseDurationSeconds": secs, "acquireTime": now, "renewTime": now}}
	body, err := json.Marshal(lease)
	assert.NilError(t, err)
	assert.NilError(t, cs.CoordinationV1().RESTClient().Post().Namespace(ns).Resource("leases").Body(body).Do(ctx).Error())

	for _, args := range [][]string{{"apply", "--no-wait", dir}, {"prune", dir}, {"delete", dir}} {
		code, _, errOut = runOpm(t, append(args, "--kubeconfig", env.Kubeconfig, "--lock-timeout", "0")...)
		assert.Equal(t, code, 6, "%s: %s", args[0], errOut)
		assert.Check(t, is.Contains(errOut, "held by "+holder+" since"), args[0])
		// With the environment's cluster, which need not be the current one.
		assert.Check(t, is.Contains(errOut, "opm unlock app -n "+ns+" --context "), args[0])
	}
	code, _, errOut = runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig, "--lock-timeout", "1500ms")
	assert.Equal(t, code, 6, errOut)
	assert.Check(t, is.Contains(errOut, "waiting for the release lock"))
	assert.Check(t, is.Contains(errOut, "gave up after waiting 2s"))

	// Dry runs, diff and status take no lock.
	code, _, errOut = runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig, "--dry-run", "--lock-timeout", "0")
	assert.Equal(t, code, 0, errOut)
	code, _, errOut = runOpm(t, "diff", dir, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)

	code, out, errOut := runOpm(t, "unlock", "app", "-n", ns, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, is.Contains(out, "was held by "+holder))
	code, out, _ = runOpm(t, "unlock", "app", "-n", ns, "--kubeconfig", env.Kubeconfig)
	assert.Equal(t, code, 0)
	assert.Check(t, is.Contains(out, "is not locked"))
	code, _, errOut = runOpm(t, "apply", "--no-wait", dir, "--kubeconfig", env.Kubeconfig, "--lock-timeout", "0")
	assert.Equal(t, code, 0, errOut)
}

// The fast path of a re-apply (inputs identical) writes the new commit
// into the inventory under the lock. Raced against a full apply of other
// inputs by real processes, round after round, the cluster and the
// inventory always agree and hold the inputs of whichever ended last.
func TestSkippedAppliesRaceFullApplies(t *testing.T) {
	bin := buildOpm(t)
	ns := env.Namespace(t)
	dir := deploytest.Dir(t, ns, ``)
	gitRepo(t, dir, "start")
	cs := kubernetes.NewForConfigOrDie(env.Config)
	names := []string{"blue", "green"}
	files := []string{deploytest.Values(t, `name: "blue"`), deploytest.Values(t, `name: "green"`)}
	skipped := 0
	for round := range 8 {
		// Blue is recorded until a re-apply takes the fast path (once the
		// controllers are done with the new Deployment, a re-apply records
		// what they made of it); a commit that does not touch the release
		// follows.
		// The same binary as the race: the fingerprint names the opm that
		// rendered.
		fast := false
		for try := 0; try < 40 && !fast; try++ {
			p := startOpm(t, bin, "apply", "--no-wait", dir, "-f", files[0], "--kubeconfig", env.Kubeconfig)
			p.wait()
			assert.Equal(t, p.code, 0, p.stderr.String())
			fast = strings.Contains(p.stdout.String(), "unchanged (inputs identical)")
			if !fast {
				time.Sleep(250 * time.Millisecond)
			}
		}
		assert.Assert(t, fast, "round %d: a re-apply of blue never took the fast path", round)
		assert.NilError(t, os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte(fmt.Sprintf("round %d\n", round)), 0o644))
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", fmt.Sprintf("round %d", round))

		ps := make([]*proc, 2)
		var wg sync.WaitGroup
		// Odd rounds start the fast path (blue) first, even ones the full
		// apply (green), a few milliseconds apart, to vary which reaches the
		// lock first; the assertions below hold in either order.
		order := []int{0, 1}
		if round%2 == 0 {
			order = []int{1, 0}
		}
		for n, i := range order {
			if n == 1 {
				time.Sleep(time.Duration(30*round) * time.Millisecond)
			}
			ps[i] = startOpm(t, bin, "apply", "--no-wait", dir, "-f", files[i], "--kubeconfig", env.Kubeconfig, "--lock-lease-duration", "3s")
			wg.Add(1)
			go func() { defer wg.Done(); ps[i].wait() }()
		}
		wg.Wait()
		for i, p := range ps {
			assert.Equal(t, p.code, 0, "round %d %s: %s%s", round, names[i], p.stdout.String(), p.stderr.String())
		}
		if strings.Contains(ps[0].stdout.String(), "unchanged (inputs identical)") {
			skipped++
		}
		lastOneWins(t, cs, ns, names, ps)
	}
	t.Logf("%d of 8 rounds took the fast path for blue", skipped)
	assert.Assert(t, skipped > 0, "the fast path never ran, so it was never raced")
}
