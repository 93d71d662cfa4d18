package node

import (
	"os"
	"path/filepath"
	"testing"
)

// The incarnation grows at every start, above the one kept in the data
// dir even when the clock is behind it, and above the one before a revive.
func TestNextIncarnation(t *testing.T) {
	dir := t.TempDir()
	a, err := nextIncarnation(dir, 0)
	if err != nil || a == 0 {
		t.Fatalf("first start: %d, %v", a, err)
	}
	b, err := nextIncarnation(dir, 0)
	if err != nil || b <= a {
		t.Fatalf("second start: %d after %d, %v", b, a, err)
	}
	// A clock stepped back: the kept incarnation is far ahead of it.
	ahead := uint64(1) << 63
	if err := os.WriteFile(filepath.Join(dir, incarnationFile), []byte("9223372036854775808\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := nextIncarnation(dir, 0); err != nil || c != ahead+1 {
		t.Fatalf("after a clock stepped back: %d, %v; want %d", c, err, ahead+1)
	}
	if d, _ := nextIncarnation("", ahead); d != ahead+1 {
		t.Fatalf("a revive in memory: %d, want %d", d, ahead+1)
	}
	// A file that cannot be read is reported, and the clock still serves.
	if err := os.WriteFile(filepath.Join(dir, incarnationFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := nextIncarnation(dir, 0); err == nil || e == 0 {
		t.Fatalf("an unreadable file: %d, %v; want an error and an incarnation", e, err)
	}
}
