package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// Issue 12 with the real binaries.

// runElectord runs electord with args until it exits (within 10s) and
// returns its exit code and stderr.
func runElectord(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, electordBin, args...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	case err != nil:
		t.Fatalf("electord %s: %v", strings.Join(args, " "), err)
	}
	return 0, stderr.String()
}

// A non-loopback address without TLS material and a gossip key is refused
// at start, naming the missing keys; --insecure starts, saying so loudly.
func TestSecurityExposedNeedsTLS(t *testing.T) {
	args := []string{"--id", "1", "--api-addr", "0.0.0.0:" + strconv.Itoa(freePort(t)), "--peer-addr", closedAddr(t),
		"--gossip-addr", closedAddr(t), "--http-addr", closedAddr(t), "--gossip-preset", "local"}
	code, out := runElectord(t, args...)
	if code != 2 || !strings.Contains(out, "tls-cert, tls-key, tls-ca, gossip-key-file") || !strings.Contains(out, "--insecure") {
		t.Fatalf("exposed without TLS: exit %d, want 2 naming the keys and --insecure:\n%s", code, out)
	}

	cmd := exec.Command(electordBin, append(args, "--insecure")...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		ok := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "level=WARN") && strings.Contains(sc.Text(), "INSECURE") {
				ok = true
				break
			}
		}
		found <- ok
		io.Copy(io.Discard, stderr)
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Fatal("electord --insecure exited without the INSECURE warning")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no INSECURE warning within 10s")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// electord certs, one TLS node, and electctl: kill without a certificate,
// with a client one and with an admin one.
func TestSecurityCertsAndElectctl(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"certs", "ca", "--dir", dir, "--cluster", "itest"},
		{"certs", "node", "--dir", dir, "--id", "1", "--host", "127.0.0.1,localhost"},
		{"certs", "client", "--dir", dir, "--name", "web"},
		{"certs", "client", "--dir", dir, "--name", "alice", "--admin"},
		{"certs", "gossip-key", "--dir", dir},
	} {
		if code, out := runElectord(t, args...); code != 0 {
			t.Fatalf("electord %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	api := closedAddr(t)
	cmd := exec.Command(electordBin, "--id", "1", "--api-addr", api, "--peer-addr", closedAddr(t),
		"--gossip-addr", closedAddr(t), "--http-addr", closedAddr(t), "--gossip-preset", "local",
		"--tls-ca", filepath.Join(dir, "ca.crt"), "--tls-cert", filepath.Join(dir, "node-1.crt"),
		"--tls-key", filepath.Join(dir, "node-1.key"), "--gossip-key-file", filepath.Join(dir, "gossip.key"),
		"--log-level", "warn")
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("electord log:\n%s", logs.String())
		}
	}()
	ca := []string{"--endpoints", api, "--timeout", "3s", "--cacert", filepath.Join(dir, "ca.crt")}
	reader := append(ca, "--cert", filepath.Join(dir, "client-web.crt"), "--key", filepath.Join(dir, "client-web.key"))
	admin := append(ca[:len(ca):len(ca)], "--cert", filepath.Join(dir, "client-alice.crt"), "--key", filepath.Join(dir, "client-alice.key"))

	eventually(t, 10*time.Second, "node 1 leads, read with a client certificate", func() (bool, string) {
		r := electctl(t, append(reader, "-o", "json", "leader")...)
		var li client.LeaderInfo
		_ = json.Unmarshal([]byte(r.stdout), &li)
		return r.code == exitOK && li.ID == 1, r.stdout + r.stderr
	})
	if r := electctl(t, "--endpoints", api, "--timeout", "3s", "kill", "1"); r.code == exitOK {
		t.Fatalf("kill in plaintext: %v", r)
	}
	if r := electctl(t, append(ca, "kill", "1")...); r.code == exitOK {
		t.Fatalf("kill without a client certificate: %v", r)
	}
	if r := electctl(t, append(reader, "kill", "1")...); r.code != 7 || !strings.Contains(r.stderr, "admin role is required") {
		t.Fatalf("kill with a client certificate: %v, want exit 7 naming the admin role", r)
	}
	if r := electctl(t, append(admin, "kill", "1")...); r.code != exitOK || !strings.Contains(r.stdout, "killed") {
		t.Fatalf("kill with an admin certificate: %v", r)
	}
	if r := electctl(t, append(admin, "revive", "1")...); r.code != exitOK {
		t.Fatalf("revive with an admin certificate: %v", r)
	}
}

// electord dev --tls elects, and electctl with the flags it prints works.
func TestSecurityDevTLS(t *testing.T) {
	cmd := exec.Command(electordBin, "dev", "--tls", "--nodes", "3", "--base-port", "0")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), "use: electctl "); ok {
				line <- after
				break
			}
		}
		close(line)
		io.Copy(io.Discard, stdout)
	}()
	var printed string
	select {
	case printed = <-line:
	case <-time.After(20 * time.Second):
		t.Fatal("electord dev --tls printed no electctl flags within 20s")
	}
	flags := strings.Fields(strings.TrimSuffix(printed, " status"))
	if len(flags) != 8 {
		t.Fatalf("printed flags %q", printed)
	}
	var li client.LeaderInfo
	eventually(t, 15*time.Second, "a leader, read with the printed flags", func() (bool, string) {
		r := electctl(t, append(flags, "-o", "json", "leader")...)
		li = client.LeaderInfo{}
		_ = json.Unmarshal([]byte(r.stdout), &li)
		return r.code == exitOK && li.HasLeader(), r.stdout + r.stderr
	})
	if r := electctl(t, append(flags, "status")...); r.code != exitOK {
		t.Fatalf("status: %v", r)
	}
	if r := electctl(t, append(flags, "resign")...); r.code != exitOK {
		t.Fatalf("resign with the printed (admin) flags: %v", r)
	}
	if r := electctl(t, flags[0], flags[1], "status"); r.code == exitOK {
		t.Fatalf("status in plaintext against dev --tls: %v", r)
	}
}
