//go:build linux

package lf

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport/lf/lftest"
	"github.com/electord/electord/transport/peerauth"
	"github.com/electord/electord/transport/peerauth/peerauthtest"
)

const testCluster = "lf-test"

// tlsSetup makes a CA, the server's config (node 1) and the client config
// of node 2 dialling node 1.
func tlsSetup(t *testing.T) (ca *peerauthtest.CA, server, client *tls.Config) {
	t.Helper()
	ca, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := ca.NodeBase(testCluster, 1)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := ca.NodeBase(testCluster, 2)
	if err != nil {
		t.Fatal(err)
	}
	return ca, peerauth.ServerConfig(sb, testCluster), peerauth.ClientConfig(cb, testCluster, 1)
}

// startTLS starts a pool serving TLS; dial(t, ts.addr) then dials with client.
func startTLS(t *testing.T, cfg Config, v variant, client *tls.Config) *testServer {
	t.Helper()
	ts := startVariant(t, cfg, v, nil)
	tlsClients.Store(ts.addr, credentials.NewTLS(client))
	t.Cleanup(func() { tlsClients.Delete(ts.addr) })
	return ts
}

// TestTLSEcho: calls over mutual TLS, small and large (several records per
// read, the read budget spent with records left in the record layer), with
// the pattern's invariants checked under the probe.
func TestTLSEcho(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{Workers: 4}},
		{"smallBudget", Config{Workers: 4, ReadBudget: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, server, client := tlsSetup(t)
			tc.cfg.TLS = server
			ts := startTLS(t, tc.cfg, variant{}, client)
			cc := dial(t, ts.addr)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if got, err := call(ctx, cc, []byte("hello")); err != nil || string(got) != "hello" {
				t.Fatalf("call: %q, %v", got, err)
			}
			lftest.LargeEchoes(t, cc)
			load(t, ts.addr, 6, 4, 20, []int{1, 100, 3000, 70 << 10})
			checkInvariants(t, ts)
			st := ts.Stats()
			if st.TLSHandshakes != 7 || st.TLSErrors != 0 {
				t.Errorf("stats %+v", st)
			}
			ts.stop(t, false)
		})
	}
}

// TestTLSAuthInfo: a handler finds the verified certificate as
// credentials.TLSInfo in peer.FromContext, as on a grpc-go server.
func TestTLSAuthInfo(t *testing.T) {
	_, server, client := tlsSetup(t)
	type seen struct {
		id  election.NodeID
		err error
	}
	saw := make(chan seen, 1)
	ts := startTLS(t, Config{Workers: 2, TLS: server}, variant{}, client)
	ts.svc.OnEcho = func(ctx context.Context) {
		id, _, err := peerauth.NodeFromContext(ctx, testCluster)
		if p, ok := peer.FromContext(ctx); err == nil && (!ok || p.Addr == nil) {
			err = io.ErrUnexpectedEOF
		}
		saw <- seen{id, err}
	}
	cc := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := call(ctx, cc, []byte("who")); err != nil {
		t.Fatal(err)
	}
	if got := <-saw; got.err != nil || got.id != 2 {
		t.Fatalf("handler saw node %d, %v; want 2", got.id, got.err)
	}
}

// TestTLSRefused: a client without a certificate, or with one of an
// unknown CA, or speaking plain HTTP/2, gets no call through; the pool
// counts the failed handshakes and stays up.
func TestTLSRefused(t *testing.T) {
	_, server, client := tlsSetup(t)
	ts := startTLS(t, Config{Workers: 2, TLS: server}, variant{}, client)
	other, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.NodeBase(testCluster, 2)
	if err != nil {
		t.Fatal(err)
	}
	stranger.RootCAs = client.RootCAs
	for name, cfg := range map[string]*tls.Config{
		"no certificate": peerauth.ClientConfig(&tls.Config{RootCAs: client.RootCAs}, testCluster, 1),
		"unknown CA":     peerauth.ClientConfig(stranger, testCluster, 1),
	} {
		cc, err := grpc.NewClient("passthrough:///"+ts.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := call(ctx, cc, []byte("hi")); err == nil {
			t.Errorf("%s: call succeeded", name)
		}
		cancel()
		cc.Close()
	}
	// Plain HTTP/2 on a TLS port.
	plain, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := io.WriteString(plain, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if closed, _ := closedWithin(t, plain, 5*time.Second); !closed {
		t.Error("plain HTTP/2 client not closed")
	}
	eventually(t, 10*time.Second, "three failed handshakes", func() bool { return ts.Stats().TLSErrors >= 3 })
	cc := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := call(ctx, cc, []byte("hi")); err != nil {
		t.Fatalf("good client after refused ones: %v", err)
	}
}

// TestTLSHandshakeTimeout: a client that connects and never says hello is
// closed after HandshakeTimeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	_, server, client := tlsSetup(t)
	ts := startTLS(t, Config{Workers: 2, TLS: server, HandshakeTimeout: 200 * time.Millisecond}, variant{}, client)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if closed, _ := closedWithin(t, c, 5*time.Second); !closed {
		t.Fatal("silent connection not closed")
	}
	// The client may see the close before the pool has counted it.
	eventually(t, 5*time.Second, "the connection counted as a failed handshake and gone", func() bool {
		st := ts.Stats()
		return st.TLSErrors == 1 && st.Conns == 0
	})
}

// TestTLSStopDuringHandshake: Stop and GracefulStop end handshakes in
// progress at once instead of waiting for their deadline.
func TestTLSStopDuringHandshake(t *testing.T) {
	for _, hard := range []bool{false, true} {
		_, server, client := tlsSetup(t)
		ts := startTLS(t, Config{Workers: 2, TLS: server, HandshakeTimeout: time.Minute}, variant{}, client)
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "accepted", func() bool { return ts.Stats().Accepts == 1 })
		start := time.Now()
		ts.stop(t, hard)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("hard=%v: stop took %v", hard, d)
		}
		c.Close()
	}
}

// TestTLSStopAfterHandshakeRegistered: a stop that lands after a handshake
// goroutine registered its handshake but before the handshake began still
// ends the handshake at once. The probe's hook holds the goroutine at that
// point until the stop has aborted the registered handshakes.
func TestTLSStopAfterHandshakeRegistered(t *testing.T) {
	for _, hard := range []bool{false, true} {
		_, server, _ := tlsSetup(t)
		registered, proceed := make(chan struct{}), make(chan struct{})
		ts := startVariant(t, Config{Workers: 2, TLS: server, HandshakeTimeout: time.Minute}, variant{}, func(s *Server) {
			setHandshakeHook(t, s, func() {
				close(registered)
				<-proceed
			})
		})
		t.Cleanup(func() {
			select {
			case <-proceed:
			default:
				close(proceed)
			}
		})
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-registered:
		case <-time.After(10 * time.Second):
			t.Fatal("the handshake was never registered")
		}
		start := time.Now()
		done := ts.beginStop(hard)
		eventually(t, 10*time.Second, "the stop aborted the handshakes", func() bool { return handshakeAborts(ts.Server) > 0 })
		close(proceed)
		ts.awaitStop(t, hard, done)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("hard=%v: stop took %v", hard, d)
		}
		c.Close()
	}
}

// idleTLSConns opens n TLS connections to addr that complete the TLS and
// HTTP/2 handshakes (preface and SETTINGS) and then stay silent. They use
// no goroutine of their own.
func idleTLSConns(t *testing.T, addr string, client *tls.Config, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := tls.Dial("tcp", addr, client)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		if err := http2.NewFramer(c, nil).WriteSettings(); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestTLSIdleConnsNoGoroutinePerConn: many idle TLS connections cost the
// pool no goroutine each (the handshake goroutines are gone once the
// handshakes are done), and the heap each costs the server is logged.
//
// The clients live in this process too, so the server's share is what
// Stop frees: heap with the connections open minus heap after a hard Stop
// (which closes the server's side only), less what Stop frees of a pool
// without connections.
func TestTLSIdleConnsNoGoroutinePerConn(t *testing.T) {
	const N = 400
	_, server, client := tlsSetup(t)
	client.ClientSessionCache = nil

	// What a Stop frees without connections: the pool itself.
	empty := startTLS(t, Config{Workers: 4, TLS: server}, variant{}, client)
	h0 := heapAlloc()
	empty.stop(t, true)
	fixed := int64(h0) - int64(heapAlloc())

	ts := startTLS(t, Config{Workers: 4, TLS: server}, variant{}, client)
	baseline := runtime.NumGoroutine()
	idleTLSConns(t, ts.addr, client, N)
	eventually(t, 20*time.Second, "every handshake done and every HTTP/2 preface read", func() bool {
		st := ts.Stats()
		return st.TLSHandshakes == N && st.Conns == N && st.Events > 2*N
	})
	eventually(t, 10*time.Second, "no goroutine per connection", func() bool {
		return runtime.NumGoroutine() <= baseline+2
	})
	st := ts.Stats()
	if st.Live != 4 {
		t.Errorf("pool goroutines %d, want 4", st.Live)
	}
	h1 := heapAlloc()
	ts.stop(t, true)
	h2 := heapAlloc()
	per := (int64(h1) - int64(h2) - fixed) / N
	t.Logf("%d idle TLS connections: %d goroutines (%d before them); server heap per connection ≈ %d B (Stop freed %d B, %d B of it the pool's own)",
		N, runtime.NumGoroutine(), baseline, per, int64(h1)-int64(h2), fixed)
	if per > 64<<10 {
		t.Errorf("server heap per idle TLS connection %d B, over 64 KiB", per)
	}
}
