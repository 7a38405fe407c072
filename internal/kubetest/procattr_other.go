//go:build !linux

package kubetest

import "syscall"

// sysProcAttr returns no special attributes outside Linux.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}
