package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Every flag, argument or config error exits 2 with a usage hint (issue
// 14: --bogus-flag, --id abc and --id -3 exited 1 with none).
func TestFlagAndConfigErrorsExit2(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // run applies max-procs to this process
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := []string{"--id", "1", "--peer-addr", l.Addr().String(), "--api-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string // in stderr
		help string // the hint's command
	}{
		{[]string{"--bogus-flag"}, "unknown flag: --bogus-flag", "electord"},
		{[]string{"--id", "abc"}, "--id abc: want a positive whole number", "electord"},
		{[]string{"--id", "-3"}, "--id -3: want a positive whole number", "electord"},
		{[]string{"--id", "0"}, "id: must be set", "electord"},
		{[]string{"--id", "1", "--heartbeat-interval", "5"}, "--heartbeat-interval 5: want a duration", "electord"},
		{[]string{"--id", "1", "--algorithm", "paxos"}, "algorithm", "electord"},
		{[]string{"bogus"}, `unknown command or argument "bogus"`, "electord"},
		{[]string{"dev", "--nodes", "x"}, "--nodes x: want an integer", "electord dev"},
		{[]string{"dev", "--nodes", "0"}, "nodes: must be between 1 and 256", "electord dev"},
		{[]string{"dev", "--what"}, "unknown flag: --what", "electord dev"},
		{[]string{"version", "extra"}, `unknown argument "extra"`, "electord version"},
		// k8s-* errors before any port is bound or gossip joined (the
		// peer port here is taken: binding it would exit 1).
		{append([]string{"--k8s-leader-service", "x", "--kubeconfig", "/nonexistent/kc"}, busy...), `kubeconfig: "/nonexistent/kc"`, "electord"},
		{append([]string{"--k8s-leader-service", "x", "--kubeconfig", kc, "--k8s-namespace", "ns", "--k8s-pod-ip", "pod-0"}, busy...), `k8s-pod-ip: "pod-0" is not an IP address`, "electord"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != exitConfig || !strings.Contains(errb.String(), c.msg) ||
			!strings.HasSuffix(errb.String(), "Run '"+c.help+" --help' for usage.\n") || strings.Count(errb.String(), "\n") != 2 {
			t.Errorf("electord %s: exit %d, stderr:\n%s\nwant exit 2, %q and a hint to run '%s --help'", strings.Join(c.args, " "), code, errb.String(), c.msg, c.help)
		}
	}
}

// A port in use: exit 1 and a hint naming the key to change.
func TestBusyPortHint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // run applies max-procs to this process
	var out, errb bytes.Buffer
	code := run([]string{"--id", "1", "--api-addr", l.Addr().String(), "--peer-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--log-level", "error"}, &out, &errb)
	if code != exitError || !strings.Contains(errb.String(), "address already in use") ||
		!strings.Contains(errb.String(), "pick another with --api-addr (ELECTORD_API_ADDR") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and a hint naming api-addr", code, errb.String())
	}
}

// electord version and electord --version print the module version and the
// VCS revision Go stamped into the binary (issue 14: "(devel)" only).
func TestVersionPrintsRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	revs := func() string {
		b, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skipf("not in a git checkout: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	before := revs()
	bin := filepath.Join(t.TempDir(), "electord")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	after := revs() // others may commit meanwhile: either revision is right
	// Go stamps no VCS information in some checkouts (a git worktree, for
	// one): then the binary must say the revision is unknown.
	m, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	stamped := strings.Contains(string(m), "vcs.revision=")
	for _, arg := range []string{"version", "--version"} {
		b, err := exec.Command(bin, arg).CombinedOutput()
		got := string(b)
		switch {
		case err != nil || !strings.HasPrefix(got, "electord "):
			t.Errorf("electord %s: %v\n%s", arg, err, got)
		case stamped && (!strings.HasPrefix(got, "electord v") ||
			!strings.Contains(got, "revision "+before) && !strings.Contains(got, "revision "+after)):
			t.Errorf("electord %s:\n%s\nwant the module version and revision %s", arg, got, after)
		case !stamped && !strings.Contains(got, "revision unknown"):
			t.Errorf("electord %s (no VCS information stamped):\n%s\nwant \"revision unknown\"", arg, got)
		}
	}
	if !stamped {
		t.Logf("go build stamped no VCS information here; checked the 'revision unknown' answer only")
	}
}
