package inventory

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	return cs
}

func releaseIn(ns string) Release {
	return Release{Name: "minecraft", Namespace: ns, ReleaseID: "a3b8f2e1-7c4d-5a9e-b6f0-1234567890ab"}
}

func TestReadMissing(t *testing.T) {
	ns := env.Namespace(t)
	inv, err := Read(t.Context(), clientset(t), releaseIn(ns))
	assert.NilError(t, err)
	assert.Assert(t, inv == nil)
}

func TestWriteCreatesThenUpdates(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	rel := releaseIn(env.Namespace(t))

	inv := New(rel)
	inv.Record("change-sha1-00000001", change("a"), t0, 0)
	assert.NilError(t, Write(ctx, cs, inv))
	assert.Assert(t, inv.ResourceVersion() != "")

	got, err := Read(ctx, cs, rel)
	assert.NilError(t, err)
	assert.Equal(t, got.ResourceVersion(), inv.ResourceVersion())
	assert.DeepEqual(t, got.Index, []string{"change-sha1-00000001"})

	got.Record("change-sha1-00000002", change("b"), t0.Add(time.Hour), 0)
	assert.NilError(t, Write(ctx, cs, got))

	s, err := cs.CoreV1().Secrets(rel.Namespace).Get(ctx, SecretName(rel.Name, rel.ReleaseID), metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Equal(t, string(s.Type), SecretType)
	assert.Equal(t, string(s.Data["index"]), `["change-sha1-00000002","change-sha1-00000001"]`)
	assert.Equal(t, s.Labels[LabelComponent], ComponentInventory)
}

// A Secret named by another convention is found by the release-uuid label.
func TestReadFallsBackToLabel(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	rel := releaseIn(env.Namespace(t))
	inv := New(rel)
	inv.Record("change-sha1-00000001", change("a"), t0, 0)
	s, err := inv.Encode()
	assert.NilError(t, err)
	s.Name = "opm.minecraft.legacy"
	_, err = cs.CoreV1().Secrets(rel.Namespace).Create(ctx, s, metav1.CreateOptions{})
	assert.NilError(t, err)

	got, err := Read(ctx, cs, rel)
	assert.NilError(t, err)
	assert.Equal(t, got.Name(), "opm.minecraft.legacy")
	got.Record("change-sha1-00000002", change("b"), t0, 0)
	assert.NilError(t, Write(ctx, cs, got), "written back under the name it was found by")
}

// Edge case 5 at the store level: two writers read the same version;
// exactly one write lands and the other is a ConflictError.
func TestConcurrentWritesConflict(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			rel := releaseIn(env.Namespace(t))
			if existing {
				inv := New(rel)
				inv.Record("change-sha1-00000000", change("0"), t0, 0)
				assert.NilError(t, Write(ctx, cs, inv))
			}
			read := func() *Inventory {
				inv, err := Read(ctx, cs, rel)
				assert.NilError(t, err)
				if inv == nil {
					inv = New(rel)
				}
				return inv
			}
			a, b := read(), read()
			a.Record("change-sha1-0000000a", change("a"), t0, 0)
			b.Record("change-sha1-0000000b", change("b"), t0, 0)

			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, inv := range []*Inventory{a, b} {
				wg.Go(func() { errs[i] = Write(ctx, cs, inv) })
			}
			wg.Wait()
			assert.Assert(t, (errs[0] == nil) != (errs[1] == nil), "exactly one write must succeed: %v", errs)
			failed := errs[0]
			winner := "change-sha1-0000000b"
			if failed == nil {
				failed, winner = errs[1], "change-sha1-0000000a"
			}
			assert.Assert(t, IsConflict(failed))
			assert.ErrorContains(t, failed, "another apply of this release")
			assert.ErrorContains(t, failed, "re-run")

			got := read()
			assert.Equal(t, got.Index[0], winner)
		})
	}
}

func TestDelete(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	rel := releaseIn(env.Namespace(t))
	inv := New(rel)
	inv.Record("change-sha1-00000001", change("a"), t0, 0)
	assert.NilError(t, Write(ctx, cs, inv))

	stale, err := Read(ctx, cs, rel)
	assert.NilError(t, err)
	inv.Record("change-sha1-00000002", change("b"), t0, 0)
	assert.NilError(t, Write(ctx, cs, inv))
	assert.Assert(t, IsConflict(Delete(ctx, cs, stale)), "a Secret changed since it was read is not deleted")

	assert.NilError(t, Delete(ctx, cs, inv))
	got, err := Read(ctx, cs, rel)
	assert.NilError(t, err)
	assert.Assert(t, got == nil)
	assert.NilError(t, Delete(ctx, cs, inv), "already gone")
}

func TestReadRejectsTwoSecrets(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	rel := releaseIn(env.Namespace(t))
	for _, name := range []string{"opm.a", "opm.b"} {
		inv := New(rel)
		inv.Record("change-sha1-00000001", change("a"), t0, 0)
		s, err := inv.Encode()
		assert.NilError(t, err)
		s.Name = name
		_, err = cs.CoreV1().Secrets(rel.Namespace).Create(ctx, s, metav1.CreateOptions{})
		assert.NilError(t, err)
	}
	_, err := Read(ctx, cs, rel)
	assert.ErrorContains(t, err, "2 inventory Secrets")
}

func TestReadRejectsOtherRelease(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	rel := releaseIn(env.Namespace(t))
	other := rel
	other.ReleaseID = "00000000-0000-0000-0000-000000000000"
	inv := New(other)
	s, err := inv.Encode()
	assert.NilError(t, err)
	s.Name = SecretName(rel.Name, rel.ReleaseID)
	_, err = cs.CoreV1().Secrets(rel.Namespace).Create(ctx, s, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = Read(ctx, cs, rel)
	assert.ErrorContains(t, err, "belongs to release id")
}
