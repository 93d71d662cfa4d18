package handshake

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// selfSigned is a server certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Minute),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// NewListener: a client that never speaks does not hold up Accept, which
// returns the next client's connection handshaken, as a *tls.Conn; the
// silent one is refused for its timeout, a plaintext HTTP request gets
// net/http's 400 and is refused as not TLS; after Close, Accept fails.
func TestListenerHandshakesOffAccept(t *testing.T) {
	cert, pool := selfSigned(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := New(slog.New(slog.DiscardHandler))
	rec := r.Listener(HTTP)
	const timeout = 500 * time.Millisecond
	l := NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, timeout, rec)
	defer l.Close()
	addr := raw.Addr().String()

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	good, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	var c net.Conn
	select {
	case c = <-accepted:
	case <-time.After(timeout / 2):
		t.Fatal("Accept waited for the silent client")
	}
	tc, ok := c.(*tls.Conn)
	if !ok || !tc.ConnectionState().HandshakeComplete {
		t.Fatalf("Accept returned %T, want a handshaken *tls.Conn", c)
	}
	go func() { _, _ = io.WriteString(c, "hi") }()
	got := make([]byte, 2)
	if _, err := io.ReadFull(good, got); err != nil || string(got) != "hi" {
		t.Fatalf("read %q, %v", got, err)
	}
	c.Close()

	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the silent client: %v, want the server to close its connection", err)
	}
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, _ = io.WriteString(plain, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(plain)
	if !strings.HasPrefix(string(b), "HTTP/1.0 400 Bad Request") {
		t.Errorf("a plaintext request got %q, want a 400", b)
	}
	for deadline := time.Now().Add(5 * time.Second); rec.Count(Timeout) != 1 || rec.Count(NotTLS) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("counted %+v, want one timeout and one not_tls", r.Counts())
		}
	}

	// Close ends a handshake in progress at once, not at its timeout,
	// and does not count it.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = slow.Write([]byte{22, 3, 1}) // the start of a record: the server is in its handshake
	for deadline := time.Now().Add(5 * time.Second); pendingCount(l) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the handshake did not start")
		}
	}
	start := time.Now()
	l.Close()
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow.Read(make([]byte, 1)); err == nil || time.Since(start) >= timeout {
		t.Errorf("a handshake in progress at Close: read %v after %v, want closed at once", err, time.Since(start))
	}
	if _, err := l.Accept(); err == nil {
		t.Error("Accept after Close succeeded")
	}
	if rec.Count(Closed)+rec.Count(Other) != 0 {
		t.Errorf("a handshake ended by Close was counted: %+v", r.Counts())
	}
}

func pendingCount(l net.Listener) int {
	hl := l.(*listener)
	hl.mu.Lock()
	defer hl.mu.Unlock()
	return len(hl.pending)
}
