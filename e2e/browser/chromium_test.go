package browser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// chromium returns the path of Debian's chromium, installing it through
// apt-get when it is missing (CI machines start without it), and says so.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Log("chromium is missing: installing Debian's chromium with apt-get update && apt-get install -y chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "sh", "-c", "apt-get update && apt-get install -y chromium")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		tail = tail[max(0, len(tail)-2000):]
		t.Fatalf("installing chromium failed (%v); install it by hand (apt-get install -y chromium) or set CHROMIUM to a Chrome binary:\n%s", err, tail)
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("apt-get installed chromium, but it is not on PATH: %v", err)
	}
	t.Logf("installed chromium in %v: %s", time.Since(start).Round(time.Second), p)
	return p
}
