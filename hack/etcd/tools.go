//go:build tools

// Package etcd pins the etcd the tests and `make kube-up` run: v3.6.4, the
// version Kubernetes v1.34 ships with and kind runs, built from its Go
// module (server/v3's root package is etcd's main). It is a separate
// module so that etcd's server never enters the product's dependency
// graph.
package etcd

import _ "go.etcd.io/etcd/server/v3"
