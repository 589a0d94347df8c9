package lock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/internal/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

func clientset(t *testing.T) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	return cs
}

func TestSecondHolderWaitsThenTakesOver(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cs := clientset(t)
	opts := lock.Options{Holder: "first", LeaseDuration: 2 * time.Second}
	a, err := lock.Acquire(ctx, cs, ns, "opm.app.x", opts)
	assert.NilError(t, err)

	// Held: a zero timeout fails at once, naming the holder and the way out.
	var seen []lock.Info
	_, err = lock.Acquire(ctx, cs, ns, "opm.app.x", lock.Options{Holder: "second", Unlock: "opm unlock app -n " + ns,
		Waiting: func(i lock.Info) { seen = append(seen, i) }})
	var held *lock.HeldError
	assert.Assert(t, errors.As(err, &held), "%v", err)
	assert.Equal(t, fault.KindOf(err), fault.Conflict)
	assert.Equal(t, fault.Conflict.ExitCode(), 6)
	assert.Check(t, is.Contains(err.Error(), "held by first since"))
	assert.Check(t, is.Contains(err.Error(), "opm unlock app -n "+ns))
	assert.Equal(t, len(seen), 1)

	// Renewal keeps it held past its duration: wait until the Lease was
	// renewed beyond its first term, which without renewal would have
	// expired it.
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "opm.app.x", metav1.GetOptions{})
		assert.NilError(t, err)
		if l.Spec.RenewTime != nil && l.Spec.AcquireTime != nil && l.Spec.RenewTime.Sub(l.Spec.AcquireTime.Time) > opts.LeaseDuration {
			break
		}
		assert.Assert(t, time.Now().Before(deadline), "the Lease was not renewed past its first term within a minute: %+v", l.Spec)
		time.Sleep(100 * time.Millisecond)
	}
	assert.NilError(t, a.Lost())
	_, err = lock.Acquire(ctx, cs, ns, "opm.app.x", lock.Options{Holder: "second", Timeout: 500 * time.Millisecond})
	assert.Assert(t, errors.As(err, &held), "a renewed lock is not taken over: %v", err)

	// A waiter gets it once it is released: released after the waiter
	// reported waiting for it.
	got, waiting := make(chan error, 1), make(chan struct{})
	go func() {
		var once sync.Once
		b, err := lock.Acquire(ctx, cs, ns, "opm.app.x", lock.Options{Holder: "second", Timeout: time.Minute,
			Waiting: func(lock.Info) { once.Do(func() { close(waiting) }) }})
		if err == nil {
			err = b.Release(ctx)
		}
		got <- err
	}()
	<-waiting
	assert.NilError(t, a.Release(ctx))
	assert.NilError(t, <-got)
	info, err := lock.Get(ctx, cs, ns, "opm.app.x")
	assert.NilError(t, err)
	assert.Assert(t, info == nil, "released locks leave no Lease")
}

// A holder that died leaves a Lease nobody renews: it is taken over after
// one lease duration, not before.
func TestDeadHolderExpires(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cs := clientset(t)
	holder, secs, now := "dead@host", int32(2), metav1.NewMicroTime(time.Now())
	_, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "opm.app.y"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)
	start := time.Now()
	var waited lock.Info
	l, err := lock.Acquire(ctx, cs, ns, "opm.app.y", lock.Options{Holder: "next", LeaseDuration: 1500 * time.Millisecond, Timeout: 10 * time.Second, Waiting: func(i lock.Info) { waited = i }})
	assert.NilError(t, err)
	// Never before the dead holder's term ran out (a busy machine can
	// only make it later).
	took := time.Since(start)
	assert.Assert(t, took >= 2*time.Second, "taken over after %s, before the dead holder's 2 s term ran out", took)
	assert.Equal(t, waited.Holder, "dead@host")
	assert.Equal(t, l.Info().Holder, "next")

	// Breaking it by hand says who held it; the holder notices it lost it.
	info, err := lock.Break(ctx, cs, ns, "opm.app.y")
	assert.NilError(t, err)
	assert.Equal(t, info.Holder, "next")
	deadline := time.Now().Add(lock.DefaultLeaseDuration)
	for l.Lost() == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	assert.Assert(t, l.Lost() != nil)
	assert.NilError(t, l.Release(ctx))
}

// A cancelled run (SIGINT) still releases its lock.
func TestReleaseAfterCancel(t *testing.T) {
	ns := env.Namespace(t)
	cs := clientset(t)
	ctx, cancel := context.WithCancel(t.Context())
	l, err := lock.Acquire(ctx, cs, ns, "opm.app.z", lock.Options{Holder: "me"})
	assert.NilError(t, err)
	cancel()
	assert.NilError(t, l.Release(ctx))
	info, err := lock.Get(t.Context(), cs, ns, "opm.app.z")
	assert.NilError(t, err)
	assert.Assert(t, info == nil)
}

// Without Lease permissions the error names the verb and the resource.
func TestForbiddenNamesTheVerb(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	admin := clientset(t)
	user := "no-leases-" + ns
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "get-leases"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "get-leases"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "get-leases"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cs, err := kubernetes.NewForConfig(cfg)
	assert.NilError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = lock.Acquire(ctx, cs, ns, "opm.app.w", lock.Options{Holder: "me"})
		if fault.KindOf(err) == fault.Permission && strings.Contains(err.Error(), `"create"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, fault.KindOf(err), fault.Permission, "%v", err)
	assert.Check(t, is.Contains(err.Error(), `needs "create" on leases.coordination.k8s.io in namespace `+ns))
}
