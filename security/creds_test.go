package security_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/security"
)

// nodeAt is node id's material, its certificate naming only hosts.
func (p pki) nodeAt(t *testing.T, id uint64, hosts ...string) *security.Material {
	t.Helper()
	crt, key, err := p.ca.IssueNode(p.dir, id, hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m, err := security.Load(security.Files{CA: p.dir + "/ca.crt", Cert: crt, Key: key}, security.Options{Poll: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dialAs handshakes with server (a node's ServerConfig) listening on
// 127.0.0.1, dialled as host:port, through client's ClientCredentials.
func dialAs(t *testing.T, server *tls.Config, client *security.Material, host string, expect security.Expect) (string, error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		tls.Server(c, server).Handshake()
	}()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	authority := net.JoinHostPort(host, port)
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := client.ClientCredentials(expect).ClientHandshake(ctx, authority, raw)
	if err == nil {
		conn.Close()
	}
	return authority, err
}

// TestClientCredentialsCheckWhichNodeAnswers: dialling an IP address, the
// server's certificate must name it in an IP SAN (ClientConfig alone let
// any node of the cluster answer for any IP), a DNS name in a DNS SAN; or,
// with an expected node id, the certificate must be that node's wherever
// it is dialled.
func TestClientCredentialsCheckWhichNodeAnswers(t *testing.T) {
	p := newPKI(t, "prod")
	reader, err := security.Load(p.client(t, "web", false), security.Options{Poll: -1})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := p.nodeAt(t, 1, "10.9.9.9", "node-1.example")
	here := p.nodeAt(t, 2, "127.0.0.1", "localhost")

	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := dialAs(t, here.ServerConfig(), reader, host, security.Expect{}); err != nil {
			t.Errorf("node 2, whose certificate names %s, dialled as %s: %v", host, host, err)
		}
		addr, err := dialAs(t, elsewhere.ServerConfig(), reader, host, security.Expect{})
		if err == nil {
			t.Fatalf("node 1, whose certificate names only 10.9.9.9 and node-1.example, answered at %s", addr)
		}
		for _, want := range []string{addr, "spiffe://prod/node/1", "IP:10.9.9.9", "DNS:node-1.example", "does not name " + host} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("dialling %s: error %q does not mention %q", addr, err, want)
			}
		}
	}
	// The node id instead of the host: node 1 at 127.0.0.1 is node 1.
	if _, err := dialAs(t, elsewhere.ServerConfig(), reader, "127.0.0.1", security.Expect{NodeID: 1}); err != nil {
		t.Errorf("node 1 expected as node 1: %v", err)
	}
	addr, err := dialAs(t, here.ServerConfig(), reader, "127.0.0.1", security.Expect{NodeID: 1})
	if err == nil || !strings.Contains(err.Error(), "spiffe://prod/node/2, not node 1") || !strings.Contains(err.Error(), addr) {
		t.Errorf("node 2 answering for node 1 at %s: err = %v, want a refusal naming both", addr, err)
	}
	// A client certificate cannot serve, expected id or not.
	if _, err := dialAs(t, reader.ServerConfig(), here, "127.0.0.1", security.Expect{}); err == nil {
		t.Error("a client certificate served and was accepted")
	}
	// Another CA's node naming the host is refused.
	other := newPKI(t, "prod").nodeAt(t, 1, "127.0.0.1")
	if _, err := dialAs(t, other.ServerConfig(), reader, "127.0.0.1", security.Expect{NodeID: 1}); err == nil {
		t.Error("a node certificate of another CA was accepted")
	}
}
