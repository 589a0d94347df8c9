//go:build tools

// Package kube pins the Kubernetes control-plane binaries that tests and
// `make kube-up` run: kube-apiserver, kube-controller-manager and
// kube-scheduler. It is a separate module so that k8s.io/kubernetes never
// enters the dependency graph of the product module.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
