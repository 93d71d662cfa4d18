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

// serveTLS is NewListener over a new loopback listener, with a
// self-signed certificate and timeout, recording in rec; roots trust it.
func serveTLS(t *testing.T, timeout time.Duration) (l net.Listener, rec *Recorder, roots *x509.CertPool) {
	t.Helper()
	cert, roots := selfSigned(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec = New(slog.New(slog.DiscardHandler)).Listener(HTTP)
	l = NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, timeout, rec)
	t.Cleanup(func() { l.Close() })
	return l, rec, roots
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// NewListener: a client that never speaks does not hold up Accept, which
// returns the next client's connection handshaken, as a *tls.Conn; a
// plaintext HTTP request gets net/http's 400 and is refused as not TLS;
// Close ends a handshake in progress at once, uncounted, and Accept fails
// after it.
func TestListenerHandshakesOffAccept(t *testing.T) {
	// A minute: were handshakes done one by one in Accept, the good client
	// would wait for the silent one's.
	l, rec, roots := serveTLS(t, time.Minute)
	addr := l.Addr().String()
	silent := dial(t, addr)
	_, _ = silent.Write([]byte{22, 3, 1}) // the start of a record: the server is in its handshake
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	good := tls.Client(dial(t, addr), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err := good.Handshake(); err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	select {
	case c = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept waits for the silent client")
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

	plain := dial(t, addr)
	_, _ = io.WriteString(plain, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(plain)
	if !strings.HasPrefix(string(b), "HTTP/1.0 400 Bad Request") {
		t.Errorf("a plaintext request got %q, want a 400", b)
	}
	for deadline := time.Now().Add(10 * time.Second); rec.Count(NotTLS) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not_tls counted %d, want 1", rec.Count(NotTLS))
		}
	}

	for deadline := time.Now().Add(10 * time.Second); pendingCount(l) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes in progress, want the silent client's", pendingCount(l))
		}
	}
	l.Close()
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Error("the silent client's connection is still open after Close")
	}
	if _, err := l.Accept(); err == nil {
		t.Error("Accept after Close succeeded")
	}
	for _, r := range Reasons() {
		if n := rec.Count(r); n != 0 && r != NotTLS {
			t.Errorf("%s counted %d: a handshake ended by Close is no refusal", r, n)
		}
	}
}

// A client that says nothing is refused at the listener's timeout.
func TestListenerTimeout(t *testing.T) {
	l, rec, _ := serveTLS(t, 200*time.Millisecond)
	go func() { _, _ = l.Accept() }()
	silent := dial(t, l.Addr().String())
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the silent client: %v, want the server to close its connection", err)
	}
	for deadline := time.Now().Add(10 * time.Second); rec.Count(Timeout) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timeout counted %d, want 1", rec.Count(Timeout))
		}
	}
}

func pendingCount(l net.Listener) int {
	hl := l.(*listener)
	hl.mu.Lock()
	defer hl.mu.Unlock()
	return len(hl.pending)
}
