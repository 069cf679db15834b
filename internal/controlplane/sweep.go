package controlplane

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	workDirPrefix = "handoff-controlplane-"
	ownerFile     = "owner.pid"
)

// sweepStaleWorkDirs removes work dirs left behind by test binaries that
// died before Stop (their children die with them, by Pdeathsig, but the
// etcd data, about 120 MB, stays). A dir is removed only if the PID recorded
// in it no longer exists.
func sweepStaleWorkDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being set up
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if processGone(pid) {
			_ = os.RemoveAll(dir)
		}
	}
}

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}
