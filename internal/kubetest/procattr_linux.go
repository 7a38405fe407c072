package kubetest

import "syscall"

// sysProcAttr puts a child process in its own process group, and has the
// kernel kill it if the test binary dies without stopping it (a panic, or
// go test's timeout), so no process outlives the tests.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
