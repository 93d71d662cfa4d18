// Package testlock serializes the test packages that run real clusters and
// judge their timing (integration, integration/chaos). `go test ./...` runs
// packages in parallel, and two such packages at once on a small machine
// starve each other's processes: a quorum leader whose loop cannot run steps
// down, as it must, and a chaos check then sees a leader change that the
// fault did not cause. Each package's TestMain takes the same exclusive
// file lock, so they take turns; other packages still run alongside.
package testlock

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Path is the lock file, shared by every checkout on the machine.
var Path = filepath.Join(os.TempDir(), "electord-cluster-tests.lock")

// Acquire blocks until this process holds the lock, or timeout passes. The
// kernel releases it when the process exits, however it exits; release
// frees it sooner.
func Acquire(timeout time.Duration) (release func(), err error) {
	f, err := os.OpenFile(Path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("testlock: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("testlock: locking %s: %w", Path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("testlock: %s still held by another test package after %v", Path, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
