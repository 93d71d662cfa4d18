package peerauth_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport/peerauth"
	"github.com/electord/electord/transport/peerauth/peerauthtest"
)

func TestNodeIDFromCert(t *testing.T) {
	ca, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		uris []string
		want election.NodeID
		err  string // part of the error text; "" means success
	}{
		{"node", []string{"spiffe://c1/node/7"}, 7, ""},
		{"big id", []string{"spiffe://c1/node/18446744073709551615"}, 18446744073709551615, ""},
		{"no uri", nil, 0, "no URI SAN"},
		{"two uris", []string{"spiffe://c1/node/7", "spiffe://c1/node/8"}, 0, "2 URI SANs"},
		{"scheme", []string{"https://c1/node/7"}, 0, "not spiffe://"},
		{"cluster", []string{"spiffe://c2/node/7"}, 0, `of cluster "c2", not "c1"`},
		{"client", []string{"spiffe://c1/client/bob"}, 0, `names a "client"`},
		{"admin", []string{"spiffe://c1/admin/alice"}, 0, `names a "admin"`},
		{"zero", []string{"spiffe://c1/node/0"}, 0, "not a positive decimal"},
		{"text", []string{"spiffe://c1/node/x"}, 0, "not a positive decimal"},
		{"leading zero", []string{"spiffe://c1/node/07"}, 0, "not a positive decimal"},
		{"trailing path", []string{"spiffe://c1/node/7/x"}, 0, "not a positive decimal"},
		{"port", []string{"spiffe://c1:9/node/7"}, 0, "of cluster"},
		{"query", []string{"spiffe://c1/node/7?x=1"}, 0, "query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cert, err := ca.Leaf(tc.name, tc.uris...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := peerauth.NodeIDFromCert(cert.Leaf, "c1")
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, peerauth.ErrNoIdentity) {
				t.Fatalf("got %d, %v; want an ErrNoIdentity containing %q", got, err, tc.err)
			}
		})
	}
	if _, err := peerauth.NodeIDFromCert(nil, "c1"); err == nil {
		t.Fatal("nil certificate accepted")
	}
}

// handshake runs a TLS handshake over a pipe and returns both sides' errors.
func handshake(t *testing.T, server, client *tls.Config) (serr, cerr error) {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, server)
		err := s.Handshake()
		a.Close()
		done <- err
	}()
	c := tls.Client(b, client)
	cerr = c.Handshake()
	b.Close()
	return <-done, cerr
}

func TestConfigs(t *testing.T) {
	ca, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	must := mustConfig(t)
	srv := peerauth.ServerConfig(must(ca.NodeBase("c1", 2)), "c1")
	if srv.MinVersion != tls.VersionTLS13 || srv.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("server config: version %x, client auth %v", srv.MinVersion, srv.ClientAuth)
	}

	// Node 1 dialling node 2, which it is.
	if serr, cerr := handshake(t, srv, peerauth.ClientConfig(must(ca.NodeBase("c1", 1)), "c1", 2)); serr != nil || cerr != nil {
		t.Fatalf("good pair: server %v, client %v", serr, cerr)
	}
	// Node 1 meant node 3 but reached node 2: the client refuses.
	_, cerr := handshake(t, srv, peerauth.ClientConfig(must(ca.NodeBase("c1", 1)), "c1", 3))
	if cerr == nil || !strings.Contains(cerr.Error(), "dialled node 3 but the server's certificate names node 2") {
		t.Fatalf("wrong node: client error %v", cerr)
	}
	// A server certificate from another CA: the client refuses.
	bad := peerauth.ServerConfig(must(other.NodeBase("c1", 2)), "c1")
	bad.ClientCAs = ca.Pool
	if _, cerr := handshake(t, bad, peerauth.ClientConfig(must(ca.NodeBase("c1", 1)), "c1", 2)); cerr == nil {
		t.Fatal("server certificate of an unknown CA accepted")
	}
	// A client certificate naming an API client, not a node: the server refuses.
	bob, err := ca.Leaf("bob", "spiffe://c1/client/bob")
	if err != nil {
		t.Fatal(err)
	}
	if serr, _ := handshake(t, srv, peerauth.ClientConfig(ca.Base(bob), "c1", 2)); serr == nil || !strings.Contains(serr.Error(), "client") {
		t.Fatalf("client identity on the peer port: server error %v", serr)
	}
	// No client certificate at all: the server refuses.
	nocert := peerauth.ClientConfig(&tls.Config{RootCAs: ca.Pool}, "c1", 2)
	if serr, _ := handshake(t, srv, nocert); serr == nil {
		t.Fatal("client without a certificate accepted")
	}
	// TLS 1.2 is refused.
	old := peerauth.ClientConfig(must(ca.NodeBase("c1", 1)), "c1", 2)
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if serr, _ := handshake(t, srv, old); serr == nil {
		t.Fatal("TLS 1.2 accepted")
	}
}

// TestPoolIsReadAtEveryHandshake: with ServerConfigPool and
// ClientConfigPool, the CA pool is the one of the moment, so a node moves
// to a new CA (its bundle rewritten on disk) without a restart: after the
// move, certificates of the old CA are refused on both sides.
func TestPoolIsReadAtEveryHandshake(t *testing.T) {
	oldCA, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	must := mustConfig(t)
	var cur atomic.Pointer[x509.CertPool]
	cur.Store(oldCA.Pool)
	pool := func() *x509.CertPool { return cur.Load() }
	srv := peerauth.ServerConfigPool(must(oldCA.NodeBase("c1", 2)), "c1", pool)
	if serr, cerr := handshake(t, srv, peerauth.ClientConfigPool(must(oldCA.NodeBase("c1", 1)), "c1", 2, pool)); serr != nil || cerr != nil {
		t.Fatalf("before the move: server %v, client %v", serr, cerr)
	}

	cur.Store(newCA.Pool) // the bundle on disk now holds only the new CA
	oldPool := func() *x509.CertPool { return oldCA.Pool }
	// A peer still on an old-CA certificate: this server refuses it.
	serr, _ := handshake(t, srv, peerauth.ClientConfigPool(must(oldCA.NodeBase("c1", 1)), "c1", 2, oldPool))
	if serr == nil || !strings.Contains(serr.Error(), "client certificate") {
		t.Fatalf("old-CA client after the move: server error %v", serr)
	}
	// A server still on an old-CA certificate: this client refuses it.
	_, cerr := handshake(t, peerauth.ServerConfigPool(must(oldCA.NodeBase("c1", 2)), "c1", oldPool),
		peerauth.ClientConfigPool(must(newCA.NodeBase("c1", 1)), "c1", 2, pool))
	if cerr == nil || !strings.Contains(cerr.Error(), "server certificate") {
		t.Fatalf("old-CA server after the move: client error %v", cerr)
	}
	// Both on the new CA: accepted, by the same configs as before the move.
	srvNew := peerauth.ServerConfigPool(must(newCA.NodeBase("c1", 2)), "c1", pool)
	if serr, cerr := handshake(t, srvNew, peerauth.ClientConfigPool(must(newCA.NodeBase("c1", 1)), "c1", 2, pool)); serr != nil || cerr != nil {
		t.Fatalf("after the move: server %v, client %v", serr, cerr)
	}
}

// mustConfig returns a function that unwraps a config, failing t on error.
func mustConfig(t *testing.T) func(*tls.Config, error) *tls.Config {
	return func(c *tls.Config, err error) *tls.Config {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}
