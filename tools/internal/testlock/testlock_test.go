package testlock

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second holder waits: within one process flock locks are per open file,
// so two Acquires conflict as two processes would.
func TestAcquireExcludes(t *testing.T) {
	Path = filepath.Join(t.TempDir(), "lock")
	release, err := Acquire(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "still held") {
		t.Fatalf("second Acquire while held: %v, want a timeout naming the lock", err)
	}
	release()
	again, err := Acquire(time.Second)
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	again()
}
