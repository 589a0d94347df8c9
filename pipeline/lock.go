package pipeline

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// Locking says how apply, prune and delete take a release's lock: a Lease
// in the release namespace named after its inventory Secret, held from
// before the inventory is read until after it is written. A dry run takes
// no lock.
type Locking struct {
	// Holder names this run in the Lease (who holds the lock): the CI run
	// URL or user@host (the default, lock.Holder()).
	Holder string `json:"holder,omitempty"`
	// LockTimeout bounds the wait for another run's lock; 5m when zero.
	LockTimeout time.Duration `json:"lockTimeout,omitempty"`
	// NoLockWait fails at once when another run holds the lock.
	NoLockWait bool `json:"noLockWait,omitempty"`
	// LeaseDuration is how long the lock outlives its holder's last
	// renewal (a holder that died); 60s when zero. Tests shorten it.
	LeaseDuration time.Duration `json:"leaseDuration,omitempty"`
	// LockWaiting hears, once per release, that another run holds the lock.
	LockWaiting func(LockHolder) `json:"-"`
	// LockTakenOver hears that the lock was taken over from a run that
	// stopped renewing it (killed, or its machine gone).
	LockTakenOver func(LockHolder) `json:"-"`
}

// LockHolder describes who holds a release's lock.
type LockHolder = lock.Info

func (l Locking) options() *lock.Options {
	o := &lock.Options{Holder: l.Holder, LeaseDuration: l.LeaseDuration, Timeout: l.LockTimeout, Waiting: l.LockWaiting, TookOver: l.LockTakenOver}
	if o.Holder == "" {
		o.Holder = lock.Holder()
	}
	switch {
	case l.NoLockWait:
		o.Timeout = 0
	case o.Timeout <= 0:
		o.Timeout = lock.DefaultTimeout
	}
	return o
}

// UnlockOptions select the release whose lock Unlock breaks.
type UnlockOptions struct {
	ClusterOptions
	Namespace string `json:"namespace"`
	// Name and/or ReleaseID select the release; with only a name, it must
	// be unambiguous in the namespace.
	Name      string `json:"name,omitempty"`
	ReleaseID string `json:"releaseId,omitempty"`
}

// UnlockResult says whose lock Unlock broke; Held is false when the
// release was not locked.
type UnlockResult struct {
	Lease  string     `json:"lease,omitempty"`
	Held   bool       `json:"held"`
	Holder LockHolder `json:"holder"`
}

// Unlock breaks a release's lock by hand (a holder that died, when waiting
// for its lease to expire is not wanted). A live holder notices at its next
// renewal and stops before pruning or writing the inventory.
func Unlock(ctx context.Context, opts UnlockOptions) (*UnlockResult, error) {
	if opts.Namespace == "" || (opts.Name == "" && opts.ReleaseID == "") {
		return nil, fault.Validationf("unlock needs the release name (or --release-id) and --namespace")
	}
	cl, err := newClusters(ctx, opts.ClusterOptions).For(ctx, &render.Release{})
	if err != nil {
		return nil, err
	}
	set := labels.Set{manifest.LabelManagedBy: manifest.ManagedByOPM, inventory.LabelComponent: inventory.ComponentLock}
	if opts.Name != "" {
		set[manifest.LabelReleaseName] = opts.Name
	}
	if opts.ReleaseID != "" {
		set[manifest.LabelReleaseUUID] = opts.ReleaseID
	}
	list, err := cl.Clientset.CoordinationV1().Leases(opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: set.String()})
	if err != nil {
		return nil, fmt.Errorf("list the release locks (Leases) in %s with %s: %w", opts.Namespace, set, err)
	}
	switch len(list.Items) {
	case 0:
		return &UnlockResult{}, nil
	case 1:
	default:
		names := make([]string, 0, len(list.Items))
		for _, l := range list.Items {
			names = append(names, l.Name)
		}
		return nil, fault.Validationf("%d releases named %q are locked in %s (%v): select one with --release-id", len(names), opts.Name, opts.Namespace, names)
	}
	name := list.Items[0].Name
	info, err := lock.Break(ctx, cl.Clientset, opts.Namespace, name)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return &UnlockResult{Lease: name}, nil
	}
	return &UnlockResult{Lease: name, Held: true, Holder: *info}, nil
}
