//go:build tools

// Package kwok pins kwok, which simulates nodes and pod lifecycles for the
// local control plane (no kubelet or container engine runs here). It is its
// own module because kwok needs newer k8s.io libraries than the pinned
// k8s.io/kubernetes of hack/kube.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
