// Package lock holds a release's lock: a coordination.k8s.io/v1 Lease in the
// release namespace, taken with create/update on resourceVersion, renewed
// while the run lasts and deleted at the end. A second run waits for it; a
// holder that died stops renewing, and its lease is taken over once it has
// not moved for its lease duration (measured on the waiter's own clock, so
// clock skew between machines cannot break a live lock).
package lock

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/fault"
)

// Defaults.
const (
	// DefaultLeaseDuration is how long a lease stays valid without renewal.
	DefaultLeaseDuration = 60 * time.Second
	// DefaultTimeout is how long a run waits for another's lock.
	DefaultTimeout = 5 * time.Minute
)

// Options tune Acquire.
type Options struct {
	// Holder says who holds the lock: user@host or a CI run URL (Holder()).
	Holder string
	// LeaseDuration is how long the lease is valid without renewal;
	// DefaultLeaseDuration when zero. Renewal runs every third of it.
	LeaseDuration time.Duration
	// Timeout bounds the wait for another holder; zero fails at once.
	Timeout time.Duration
	// Labels go on a Lease this run creates.
	Labels map[string]string
	// Waiting is called once, when the lock is found held by another run.
	Waiting func(Info)
	// TookOver is called when the lock is taken over from a holder that
	// stopped renewing it (a killed run): what it was doing may be half
	// done, which the run that takes over repairs.
	TookOver func(Info)
	// Unlock is the command that breaks this lock, for error messages.
	Unlock string
}

func (o Options) leaseDuration() time.Duration {
	if o.LeaseDuration > 0 {
		return o.LeaseDuration
	}
	return DefaultLeaseDuration
}

// Info describes a Lease's holder.
type Info struct {
	Namespace, Name string
	Holder          string
	// Since is when the holder acquired it; Renewed its last renewal.
	Since, Renewed time.Time
	Duration       time.Duration
}

func infoOf(l *coordinationv1.Lease) Info {
	in := Info{Namespace: l.Namespace, Name: l.Name}
	if l.Spec.HolderIdentity != nil {
		in.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		in.Since = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		in.Renewed = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		in.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return in
}

// String is "HOLDER since TIME".
func (i Info) String() string {
	s := i.Holder
	if s == "" {
		s = "(unknown holder)"
	}
	if !i.Since.IsZero() {
		s += " since " + i.Since.UTC().Format(time.RFC3339)
	}
	return s
}

// HeldError says the lock stayed held by another run for the whole timeout.
type HeldError struct {
	Info   Info
	Waited time.Duration
	Unlock string
}

func (e *HeldError) Error() string {
	how := "delete the Lease"
	if e.Unlock != "" {
		how = "run `" + e.Unlock + "`"
	}
	return fmt.Sprintf("Lease %s/%s is held by %s (another run of this release); gave up after waiting %s (--lock-timeout). "+
		"If that run is still going, wait and re-run; if it died, its lock expires %s after its last renewal, or %s to break it",
		e.Info.Namespace, e.Info.Name, e.Info, e.Waited.Round(time.Second), e.Info.Duration, how)
}

// Holder is who this process is: the GitHub Actions run URL when
// GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID are set, else
// user@host.
func Holder() string { return HolderFrom(os.Getenv) }

// HolderFrom is Holder with the environment read through getenv: a front
// door that runs commands for several callers in one process (the CLI's
// tests) gives each its own.
func HolderFrom(getenv func(string) string) string {
	srv, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if srv != "" && repo != "" && id != "" {
		return srv + "/" + repo + "/actions/runs/" + id
	}
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return name + "@" + host
}

// Lock is a held lock; Release it when done.
type Lock struct {
	cs     kubernetes.Interface
	lease  *coordinationv1.Lease
	opts   Options
	mu     sync.Mutex
	lost   error
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// Acquire takes the Lease namespace/name, waiting up to opts.Timeout while
// another live holder has it, and keeps it renewed until Release. A
// forbidden request is a permission error naming the verb and resource.
func Acquire(ctx context.Context, cs kubernetes.Interface, namespace, name string, opts Options) (*Lock, error) {
	leases := cs.CoordinationV1().Leases(namespace)
	dur := opts.leaseDuration()
	poll := min(time.Second, dur/4)
	start := time.Now()
	var notified bool
	// The other holder's lease is expired once its resourceVersion has not
	// moved for its duration, as this process observed it.
	var seenRV string
	var seenAt time.Time
	for {
		now := time.Now()
		cur, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l := newLease(namespace, name, opts, now)
			created, err := leases.Create(ctx, l, metav1.CreateOptions{})
			if err == nil {
				return hold(cs, created, opts), nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, requestError("create", namespace, name, err)
			}
			continue
		case err != nil:
			return nil, requestError("get", namespace, name, err)
		}
		info := infoOf(cur)
		if cur.ResourceVersion != seenRV {
			seenRV, seenAt = cur.ResourceVersion, now
		}
		expiry := info.Duration
		if expiry <= 0 {
			expiry = dur
		}
		if info.Holder == "" || now.Sub(seenAt) >= expiry {
			next := cur.DeepCopy()
			fillSpec(next, opts, now)
			n := int32(1)
			if cur.Spec.LeaseTransitions != nil {
				n = *cur.Spec.LeaseTransitions + 1
			}
			next.Spec.LeaseTransitions = &n
			updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
			if err == nil {
				if info.Holder != "" && opts.TookOver != nil {
					opts.TookOver(info)
				}
				return hold(cs, updated, opts), nil
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return nil, requestError("update", namespace, name, err)
			}
			continue
		}
		if !notified && opts.Waiting != nil {
			opts.Waiting(info)
		}
		notified = true
		waited := time.Since(start)
		if waited >= opts.Timeout {
			return nil, fault.Wrap(fault.Conflict, &HeldError{Info: info, Waited: waited, Unlock: opts.Unlock})
		}
		t := time.NewTimer(min(poll, opts.Timeout-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for Lease %s/%s held by %s: %w", namespace, name, info, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func newLease(namespace, name string, opts Options, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: opts.Labels}}
	fillSpec(l, opts, now)
	return l
}

func fillSpec(l *coordinationv1.Lease, opts Options, now time.Time) {
	holder := opts.Holder
	secs := int32(opts.leaseDuration().Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.AcquireTime = &t
	l.Spec.RenewTime = &t
}

// requestError classifies a failed Lease request; a forbidden one says
// which permission is missing, since locking is not optional.
func requestError(verb, namespace, name string, err error) error {
	if apierrors.IsForbidden(err) {
		return fault.Wrap(fault.Permission, fmt.Errorf("locking the release needs %q on leases.coordination.k8s.io in namespace %s, which is forbidden: grant get, create, update and delete on leases there: %w",
			verb, namespace, err))
	}
	return fmt.Errorf("%s Lease %s/%s (the release lock): %w", verb, namespace, name, err)
}

func hold(cs kubernetes.Interface, l *coordinationv1.Lease, opts Options) *Lock {
	lk := &Lock{cs: cs, lease: l, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	go lk.renew()
	return lk
}

// renew refreshes the lease every third of its duration until Release, or
// until it finds the lease taken or deleted (then Lost reports why).
func (l *Lock) renew() {
	defer close(l.done)
	dur := l.opts.leaseDuration()
	t := time.NewTicker(dur / 3)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), dur/3)
		l.mu.Lock()
		next := l.lease.DeepCopy()
		l.mu.Unlock()
		now := metav1.NewMicroTime(time.Now())
		next.Spec.RenewTime = &now
		out, err := l.cs.CoordinationV1().Leases(next.Namespace).Update(ctx, next, metav1.UpdateOptions{})
		cancel()
		l.mu.Lock()
		switch {
		case err == nil:
			l.lease, last = out, time.Now()
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			l.lost = fmt.Errorf("the lock (Lease %s/%s) was taken over or broken while this run held it: %w", next.Namespace, next.Name, err)
		case time.Since(last) >= dur:
			l.lost = fmt.Errorf("the lock (Lease %s/%s) could not be renewed within its %s duration: %w", next.Namespace, next.Name, dur, err)
		}
		lost := l.lost != nil
		l.mu.Unlock()
		if lost {
			return
		}
	}
}

// Lost is nil while the lock is held, else why it was lost.
func (l *Lock) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return fault.Wrap(fault.Conflict, l.lost)
	}
	return nil
}

// Release stops renewing and deletes the Lease if this run still holds
// it. It works on a cancelled ctx (SIGINT/SIGTERM), bounded to 10 seconds.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if l.Lost() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	l.mu.Lock()
	lease := l.lease
	l.mu.Unlock()
	rv, uid := lease.ResourceVersion, lease.UID
	err := l.cs.CoordinationV1().Leases(lease.Namespace).Delete(ctx, lease.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid},
	})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return requestError("delete", lease.Namespace, lease.Name, err)
}

// readLease reads the Lease namespace/name; nil when there is none.
func readLease(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*coordinationv1.Lease, error) {
	l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, requestError("get", namespace, name, err)
	}
	return l, nil
}

// Break deletes the Lease namespace/name whoever holds it, and says who
// did; nil when there was no lock. The holder, if alive, finds out at its
// next renewal and stops before pruning or writing the inventory.
func Break(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*Info, error) {
	l, err := readLease(ctx, cs, namespace, name)
	if l == nil || err != nil {
		return nil, err
	}
	in := infoOf(l)
	rv := l.ResourceVersion
	err = cs.CoordinationV1().Leases(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return &in, nil
	case apierrors.IsConflict(err):
		return nil, fault.Wrap(fault.Conflict, fmt.Errorf("the Lease %s/%s changed while breaking it (its holder is alive and renewing): %w", namespace, name, err))
	}
	return nil, requestError("delete", namespace, name, err)
}
