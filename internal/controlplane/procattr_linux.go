package controlplane

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procAttr puts each child in its own process group (so a terminal's
// Ctrl-C is not delivered to it directly and it can be signalled on its own)
// and asks the kernel to SIGKILL it when the thread that started it dies,
// which in practice means when the test binary dies, even by SIGKILL.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// processGone reports whether no process with this PID is alive (it does
// not exist, or it is a zombie nobody has reaped yet).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z' || stat[i+2] == 'X'
	}
	return false
}
