package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a process gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// logTailBytes is how much of a process log an error message quotes.
const logTailBytes = 4 << 10

// process is one child started by a ControlPlane.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	logFile *os.File

	done    chan struct{} // closed once cmd.Wait returned
	waitErr error         // valid after done is closed
}

// spawnRequests is served by one goroutine locked to its OS thread for the
// lifetime of the test binary. Pdeathsig fires when the *thread* that forked
// the child exits, and the Go runtime may retire a thread, so every child is
// forked from this one thread, which never exits before the process does.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must stay.
			for req := range spawnRequests {
				req.reply <- req.cmd.Start()
			}
		}()
	})
	reply := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, reply: reply}
	return <-reply
}

// startProcess starts binary with args, its stdout and stderr going to
// logPath.
func startProcess(name, binary, logPath string, args []string) (*process, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%s: binary: %w", name, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Stdin = nil
	cmd.Env = childEnv()
	cmd.SysProcAttr = procAttr()
	if err := spawn(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, binary, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the environment of the children: the test's own, without
// proxy settings (everything is on loopback) and without KUBECONFIG.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the
// process to be reaped. Only this process (by its PID) is signalled.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(stopGrace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// errorf returns an error naming the process and quoting its log tail.
func (p *process) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s\n--- last lines of %s ---\n%s", p.name, fmt.Sprintf(format, args...), p.logPath, tail(p.logPath, logTailBytes))
}

// logContains reports whether the process log contains s.
func (p *process) logContains(s string) bool {
	data, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(data, []byte(s))
}

// tail returns roughly the last n bytes of a file, from a line start.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	if len(data) == 0 {
		return "(log is empty)"
	}
	return strings.TrimRight(string(data), "\n")
}
