package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/election"
	"github.com/electord/electord/security"
)

// secureFixture is a fake three-node cluster, node 3 leading, serving its
// api with TLS and authorization, and the flags of a reader and an admin.
type secureFixture struct {
	c            *apitest.Cluster
	addrs        []string
	ca           string
	reader       []string // --cacert --cert --key of a client certificate
	admin        []string // of an admin certificate
	adminFiles   [3]string
	readerDenied func() uint64
}

func newSecureFixture(t *testing.T) *secureFixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, "prod", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &secureFixture{c: apitest.NewCluster(3), ca: dir + "/" + security.CACertFile}
	f.c.Elect(3)
	var secs []*api.Security
	for id := uint64(1); id <= 3; id++ {
		crt, key, err := ca.IssueNode(dir, id, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		m, err := security.Load(security.Files{CA: f.ca, Cert: crt, Key: key}, security.Options{Poll: -1})
		if err != nil {
			t.Fatal(err)
		}
		sec := &api.Security{ServerTLS: m.ServerConfig(), Forward: m.ForwardCredentials, Cluster: "prod"}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.NewSecureGRPCServer(f.c.Node(election.NodeID(id)), apitest.Limits(), sec)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		f.c.SetAPIAddr(election.NodeID(id), lis.Addr().String())
		f.addrs = append(f.addrs, lis.Addr().String())
		secs = append(secs, sec)
	}
	f.readerDenied = func() uint64 { return secs[0].Denied() }
	crt, key, err := ca.IssueClient(dir, "web", false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.reader = []string{"--cacert", f.ca, "--cert", crt, "--key", key}
	crt, key, err = ca.IssueClient(dir, "alice", true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.admin = []string{"--cacert", f.ca, "--cert", crt, "--key", key}
	f.adminFiles = [3]string{f.ca, crt, key}
	return f
}

func (f *secureFixture) run(t *testing.T, creds []string, args ...string) result {
	t.Helper()
	all := append([]string{"--endpoints", f.addrs[0], "--timeout", "3s"}, creds...)
	return electctl(t, append(all, args...)...)
}

func TestSecureKillNeedsAnAdminCertificate(t *testing.T) {
	f := newSecureFixture(t)
	// No certificate at all: plaintext to a TLS port.
	if r := f.run(t, nil, "kill", "2"); r.code == ExitOK || f.c.Killed(2) {
		t.Fatalf("kill without TLS: %+v", r)
	}
	// TLS, but no client certificate: the handshake is refused.
	if r := f.run(t, []string{"--cacert", f.ca}, "kill", "2"); r.code == ExitOK || f.c.Killed(2) {
		t.Fatalf("kill without a client certificate: %+v", r)
	}
	// A client certificate may read...
	if r := f.run(t, f.reader, "leader"); r.code != ExitOK {
		t.Fatalf("leader as a client: %+v", r)
	}
	if r := f.run(t, f.reader, "status"); r.code != ExitOK {
		t.Fatalf("status as a client: %+v", r)
	}
	// ...but not kill.
	r := f.run(t, f.reader, "kill", "2")
	if r.code != ExitPermission || !strings.Contains(r.stderr, "admin role is required") || f.c.Killed(2) {
		t.Fatalf("kill as a client: %+v, want exit %d naming the admin role", r, ExitPermission)
	}
	if f.readerDenied() != 1 {
		t.Fatalf("denied %d, want 1", f.readerDenied())
	}
	// An admin may: node 1 forwards the kill to node 2.
	if r := f.run(t, f.admin, "kill", "2"); r.code != ExitOK || !f.c.Killed(2) {
		t.Fatalf("kill as an admin: %+v", r)
	}
	if r := f.run(t, f.admin, "revive", "2"); r.code != ExitOK || f.c.Killed(2) {
		t.Fatalf("revive as an admin: %+v", r)
	}
}

func TestSecureFlagsFromEnvironment(t *testing.T) {
	f := newSecureFixture(t)
	t.Setenv("ELECTCTL_CACERT", f.adminFiles[0])
	t.Setenv("ELECTCTL_CERT", f.adminFiles[1])
	t.Setenv("ELECTCTL_KEY", f.adminFiles[2])
	if r := f.run(t, nil, "transfer", "1"); r.code != ExitOK {
		t.Fatalf("transfer with ELECTCTL_*: %+v", r)
	}
}

func TestSecureFlagUsage(t *testing.T) {
	for _, args := range [][]string{{"--cert", "a.crt", "leader"}, {"--cacert", "ca", "--cert", "a.crt", "--key", "", "leader"}} {
		if r := electctl(t, args...); r.code != ExitUsage {
			t.Errorf("electctl %v: %+v, want a usage error", args, r)
		}
	}
	if r := electctl(t, "--cacert", "/nonexistent/ca.crt", "leader"); r.code != ExitUsage || !strings.Contains(r.stderr, "tls-ca") {
		t.Errorf("a missing CA file: %+v", r)
	}
}
