package deploy

// Docker plumbing for rolling_test.go: every container, network, volume and
// image the test makes carries the label electord-e2e-deploy=<pid>, and is
// removed at the end, on SIGINT or SIGTERM, and by the next run if this
// process died without removing it (its pid no longer runs).

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const labelKey = "electord-e2e-deploy"

// docker runs a docker command and returns its trimmed output; an error
// carries the output.
func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		return s, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, s)
	}
	return s, nil
}

// removeLabelled removes every container, volume, network and image with
// label labelKey=value (all values if value is "").
func removeLabelled(value string) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	filter := "label=" + labelKey
	if value != "" {
		filter += "=" + value
	}
	var errs []error
	for _, kind := range []struct{ list, rm []string }{
		{[]string{"ps", "-aq", "--filter", filter}, []string{"rm", "-f", "-v"}},
		{[]string{"volume", "ls", "-q", "--filter", filter}, []string{"volume", "rm", "-f"}},
		{[]string{"network", "ls", "-q", "--filter", filter}, []string{"network", "rm"}},
		{[]string{"images", "-q", "--filter", filter}, []string{"rmi", "-f"}},
	} {
		out, err := docker(ctx, kind.list...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ids := strings.Fields(out); len(ids) > 0 {
			if _, err := docker(ctx, append(kind.rm, ids...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// sweepStale removes what earlier runs left behind when their process died
// before its cleanup (a SIGKILL, go test's timeout panic).
func sweepStale(t *testing.T) {
	out, err := docker(context.Background(), "ps", "-a", "--filter", "label="+labelKey, "--format", `{{.Label "`+labelKey+`"}}`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range strings.Fields(out) {
		pid, err := strconv.Atoi(v)
		if seen[v] || err != nil || pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue
		}
		seen[v] = true
		t.Logf("removing what run %s left behind", v)
		for _, err := range removeLabelled(v) {
			t.Log(err)
		}
	}
}

// ownResources registers the removal of everything this process labels:
// at the test's end and on SIGINT/SIGTERM (then the process exits).
func ownResources(t *testing.T) (label string) {
	label = strconv.Itoa(os.Getpid())
	var once sync.Once
	clean := func() {
		once.Do(func() {
			for _, err := range removeLabelled(label) {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "%s: removing containers, volumes, network and images\n", s)
			clean()
			os.Exit(1)
		case <-done:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(sig)
		close(done)
		clean()
	})
	return label
}

// buildImage builds a static binary of pkg (a package path, built in dir)
// and an image of it with dockerfile, labelled and tagged tag.
func buildImage(ctx context.Context, t *testing.T, dir, pkg, dockerfile, binName, tag, label string) {
	t.Helper()
	bctx := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(bctx, binName), pkg)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build %s: %v\n%s", pkg, err, out)
	}
	if _, err := docker(ctx, "build", "-q", "--label", labelKey+"="+label, "-t", tag, "-f", dockerfile, bctx); err != nil {
		t.Fatal(err)
	}
}

// dialInNetns dials addr from inside the network namespace at nsPath (a
// pod's, whose localhost ports are not reachable from outside it). The
// socket is made on a thread that joins the namespace for the dial; a
// socket keeps the namespace it was made in. If the thread cannot go back
// it stays locked and ends with its goroutine.
func dialInNetns(ctx context.Context, nsPath, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer unix.Close(back)
		ns, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer unix.Close(ns)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", addr)
		if unix.Setns(back, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
