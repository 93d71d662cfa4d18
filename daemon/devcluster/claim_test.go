//go:build unix

package devcluster

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A port whose lock file another process holds (here: another open file
// description of it, which flock treats the same) is never handed out.
func TestFreePortSkipsAPortClaimedElsewhere(t *testing.T) {
	ports.mu.Lock()
	next := ports.next
	if next == 0 {
		next = portLo + (os.Getpid()*97)%(portHi-portLo)
		ports.next = next
	}
	ports.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(portLockPath(next)), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(portLockPath(next), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Skipf("port %d is claimed by a running process already: %v", next, err)
	}
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if p == next {
		t.Fatalf("FreePort handed out %d, whose lock another holder has", p)
	}
}
