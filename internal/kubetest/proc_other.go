//go:build !linux

package kubetest

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
