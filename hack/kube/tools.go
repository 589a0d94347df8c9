//go:build tools

// Package kube pins the Kubernetes control-plane binaries that tests and
// `make kube-up` run. It is a separate module so that k8s.io/kubernetes never
// enters the dependency graph of the product module.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
