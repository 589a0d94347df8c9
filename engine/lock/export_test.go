package lock

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// Info describes the held lock, for the tests to check who holds it.
func (l *Lock) Info() Info {
	l.mu.Lock()
	defer l.mu.Unlock()
	return infoOf(l.lease)
}

// Get describes the Lease namespace/name; nil when there is none.
func Get(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*Info, error) {
	l, err := readLease(ctx, cs, namespace, name)
	if l == nil || err != nil {
		return nil, err
	}
	in := infoOf(l)
	return &in, nil
}
