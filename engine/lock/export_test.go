package lock

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, requestError("get", namespace, name, err)
	}
	in := infoOf(l)
	return &in, nil
}
