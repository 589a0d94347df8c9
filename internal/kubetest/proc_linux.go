package kubetest

import "syscall"

// childAttr kills a controller when the test binary dies without Stop.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
