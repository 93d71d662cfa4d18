package peerauth_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport/peerauth"
	"github.com/electord/electord/transport/peerauth/peerauthtest"
)

// serve hands every connection accepted on l to handle, until the test ends.
func serve(t testing.TB, l net.Listener, handle func(net.Conn)) string {
	t.Helper()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l.Addr().String()
}

// servePeer serves a stand-in peer port with cfg: each connection is
// handshaken and answered with one byte (an HTTP/2 server's SETTINGS).
func servePeer(t testing.TB, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, l, func(c net.Conn) {
		if err := c.(*tls.Conn).Handshake(); err != nil {
			return
		}
		c.Write([]byte{0})
		io.Copy(io.Discard, c)
	})
}

// relay forwards every connection to addr, as an attacker's address
// pointing at a real node would.
func relay(t *testing.T, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, l, func(c net.Conn) {
		u, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer u.Close()
		go io.Copy(u, c)
		io.Copy(c, u)
	})
}

// nodeBases is a fresh CA and a maker of its node configs for cluster.
func nodeBases(t testing.TB, cluster string) (*peerauthtest.CA, func(election.NodeID) *tls.Config) {
	t.Helper()
	ca, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	return ca, func(id election.NodeID) *tls.Config {
		b, err := ca.NodeBase(cluster, id)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestProver(t *testing.T) {
	const cluster = "c1"
	ca, base := nodeBases(t, cluster)
	// Node 3 in another process: its handshakes are not marked here.
	other := servePeer(t, peerauth.ServerConfig(base(3), cluster))
	// The prover is node 1; its own peer port is marked.
	served := &peerauth.Served{}
	self := servePeer(t, peerauth.ServerConfig(served.Mark(base(1)), cluster))
	outsider, err := ca.Leaf("outsider") // a certificate of the CA that names no node
	if err != nil {
		t.Fatal(err)
	}
	rogue := servePeer(t, peerauth.ServerConfig(ca.Base(outsider), cluster))
	// The relays listen before the dead address is freed: the kernel may
	// give a just-closed port to the next listener, and a relay to node 3
	// on it would prove what must find nothing.
	relayOther, relaySelf := relay(t, other), relay(t, self)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close()

	p := &peerauth.Prover{Client: base(1), Cluster: cluster, Timeout: 2 * time.Second, Served: served}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		id   election.NodeID
		addr string
		err  string // "" = proven
	}{
		{"holder", 3, other, ""},
		{"holder through a relay", 3, relayOther, ""},
		{"another id", 65539, other, "names node 3"},
		{"no node identity", 3, rogue, "no URI SAN"},
		{"nothing listens", 3, dead, "no TLS handshake"},
		{"no address", 3, "", "no peer address"},
		{"this node's own address", 1, self, "leads back to this node"},
		{"a relay to this node", 1, relaySelf, "leads back to this node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := p.Prove(ctx, tc.id, tc.addr)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Prove(%d, %s) = %v, want %q", tc.id, tc.addr, err, tc.err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %v", took)
			}
			// The outcome is cached: the second answer is the same, at once.
			start = time.Now()
			if err2 := p.Prove(ctx, tc.id, tc.addr); (err2 == nil) != (err == nil) || time.Since(start) > 10*time.Millisecond {
				t.Errorf("second Prove = %v after %v, want %v from the cache", err2, time.Since(start), err)
			}
		})
	}
	if err := p.Prove(ctx, 1, self); !errors.Is(err, peerauth.ErrSelf) {
		t.Errorf("Prove of this node's own address = %v, want ErrSelf", err)
	}
}

// Two nodes in one process (electord dev): each marks its own peer
// server, and a proof of the other is no relay back to itself, also through
// a relay. (With one record per process every such proof was ErrSelf.)
func TestProverTwoNodesInOneProcess(t *testing.T) {
	const cluster = "c1"
	_, base := nodeBases(t, cluster)
	served1, served2 := &peerauth.Served{}, &peerauth.Served{}
	addr1 := servePeer(t, peerauth.ServerConfig(served1.Mark(base(1)), cluster))
	addr2 := servePeer(t, peerauth.ServerConfig(served2.Mark(base(2)), cluster))
	p1 := &peerauth.Prover{Client: base(1), Cluster: cluster, Timeout: 2 * time.Second, Served: served1, Fresh: true}
	p2 := &peerauth.Prover{Client: base(2), Cluster: cluster, Timeout: 2 * time.Second, Served: served2, Fresh: true}
	ctx := context.Background()
	for _, addr := range []string{addr1, relay(t, addr1)} {
		if err := p2.Prove(ctx, 1, addr); err != nil {
			t.Errorf("node 2 proving node 1 at %s: %v", addr, err)
		}
		if err := p1.Prove(ctx, 1, addr); !errors.Is(err, peerauth.ErrSelf) {
			t.Errorf("node 1 proving its own id at %s: %v, want ErrSelf", addr, err)
		}
	}
	if err := p1.Prove(ctx, 2, addr2); err != nil {
		t.Errorf("node 1 proving node 2: %v", err)
	}
}

// A Fresh prover reuses no outcome: once the holder at an address is gone,
// the next proof there fails, where a caching prover still vouches for the
// address from its cache.
func TestProverFreshReusesNoOutcome(t *testing.T) {
	const cluster = "c1"
	_, base := nodeBases(t, cluster)
	l, err := tls.Listen("tcp", "127.0.0.1:0", peerauth.ServerConfig(base(3), cluster))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, l, func(c net.Conn) {
		if err := c.(*tls.Conn).Handshake(); err != nil {
			return
		}
		c.Write([]byte{0})
		io.Copy(io.Discard, c)
	})
	cached := &peerauth.Prover{Client: base(1), Cluster: cluster, Timeout: 2 * time.Second}
	fresh := &peerauth.Prover{Client: base(1), Cluster: cluster, Timeout: 2 * time.Second, Fresh: true}
	ctx := context.Background()
	for _, p := range []*peerauth.Prover{cached, fresh} {
		if err := p.Prove(ctx, 3, addr); err != nil {
			t.Fatalf("Prove(3, %s) while node 3 serves = %v", addr, err)
		}
	}
	l.Close() // node 3's process is gone
	if err := cached.Prove(ctx, 3, addr); err != nil {
		t.Errorf("the caching prover: %v, want its cached success", err)
	}
	if err := fresh.Prove(ctx, 3, addr); err == nil || !strings.Contains(err.Error(), "no TLS handshake") {
		t.Errorf("the fresh prover: %v, want a failed handshake", err)
	}
}

// BenchmarkProve is one proof of membership with both ends in this
// process: a mutual TLS 1.3 handshake (ECDSA P-256 certificates) on
// loopback and the relay check. Its time per op is the CPU both sides
// spend on it (on an idle machine): a node pays about that for each member
// it proves, 127 of them in a cluster of 128 at start, and each member as
// much again for the node that proves it.
func BenchmarkProve(b *testing.B) {
	const cluster = "c1"
	_, base := nodeBases(b, cluster)
	addr := servePeer(b, peerauth.ServerConfig((&peerauth.Served{}).Mark(base(3)), cluster))
	p := &peerauth.Prover{Client: base(1), Cluster: cluster, Served: &peerauth.Served{}, Fresh: true}
	ctx := context.Background()
	for b.Loop() {
		if err := p.Prove(ctx, 3, addr); err != nil {
			b.Fatal(err)
		}
	}
}
