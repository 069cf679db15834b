//go:build !linux

package controlplane

import "syscall"

// procAttr has no parent-death signal outside Linux; Stop must be called.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}

// processGone is not known here; stale work dirs are kept.
func processGone(int) bool { return false }
