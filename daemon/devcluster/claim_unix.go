//go:build unix

package devcluster

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// claimed keeps the lock files of the ports this process claimed open (a
// flock lasts as long as its file is open: until the process exits).
// FreePort calls claimPort under ports.mu, which guards it.
var claimed []*os.File

// portLockPath is the lock file of port p.
func portLockPath(p int) string {
	return filepath.Join(os.TempDir(), "electord-ports", strconv.Itoa(p))
}

// claimPort takes an exclusive lock on a file named for port p in the
// temporary directory, held until this process exits, and reports whether
// it got it: a port another running process claimed is skipped. The files
// stay (a lock is on the open file, not its name), a few bytes each.
func claimPort(p int) bool {
	path := portLockPath(p)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return true // no directory for locks: pick as before
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return true
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	claimed = append(claimed, f)
	return true
}
