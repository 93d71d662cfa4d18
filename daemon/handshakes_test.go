package daemon_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/security"
	"github.com/electord/electord/security/handshake"
)

const hsCluster = "hs-test"

// hsPKI is a cluster's CA with node 1's certificate, another CA, and the
// certificates the knocking clients present.
type hsPKI struct {
	dir     string
	pool    *x509.CertPool // the cluster's CA
	other   *x509.CertPool // another CA, which signed none of the node's certificates
	node2   tls.Certificate
	reader  tls.Certificate // a client of the cluster
	foreign tls.Certificate // node 2, signed by the other CA
	expired tls.Certificate // node 2, expired an hour ago
	alien   tls.Certificate // a client of another cluster, signed by this cluster's CA
}

func newHSPKI(t *testing.T) *hsPKI {
	t.Helper()
	p := &hsPKI{dir: t.TempDir()}
	ca, err := security.CreateCA(p.dir, hsCluster, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.IssueNode(p.dir, 1, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	other, err := security.CreateCA(t.TempDir(), hsCluster, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p.pool, p.other = x509.NewCertPool(), x509.NewCertPool()
	p.pool.AddCert(ca.Cert)
	p.other.AddCert(other.Cert)
	now := time.Now()
	node2 := security.NodeIdentity(hsCluster, 2)
	p.node2 = hsIssue(t, ca, node2, now.Add(-time.Minute), now.Add(time.Hour))
	p.reader = hsIssue(t, ca, security.Identity{Cluster: hsCluster, Role: security.RoleClient, Name: "reader"},
		now.Add(-time.Minute), now.Add(time.Hour))
	p.foreign = hsIssue(t, other, node2, now.Add(-time.Minute), now.Add(time.Hour))
	p.expired = hsIssue(t, ca, node2, now.Add(-2*time.Hour), now.Add(-time.Hour))
	p.alien = hsIssue(t, ca, security.Identity{Cluster: "other", Role: security.RoleClient, Name: "reader"},
		now.Add(-time.Minute), now.Add(time.Hour))
	return p
}

// hsIssue is a certificate of ca naming id, valid from nb to na, for both
// ends of a connection.
func hsIssue(t *testing.T, ca *security.CA, id security.Identity, nb, na time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, NotBefore: nb, NotAfter: na, URIs: []*url.URL{id.URI()},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// hsNode starts node 1 of the cluster with TLS on every listener (the
// sidecar with http-tls), handshake-timeout 2s, logging JSON to log.
func hsNode(t *testing.T, p *hsPKI, peerServer string) (*daemon.Daemon, *lockedLog) {
	t.Helper()
	cfg := devcluster.Config(1, devcluster.Options{Nodes: 1, Algorithm: "bully"}, t.TempDir(), nil)
	cfg.TLSCA = filepath.Join(p.dir, security.CACertFile)
	cfg.TLSCert, cfg.TLSKey = security.NodeFiles(p.dir, 1)
	cfg.Cluster, cfg.HTTPTLS, cfg.PeerServer = hsCluster, true, peerServer
	cfg.HandshakeTimeout = 2 * time.Second
	log := &lockedLog{}
	d, err := daemon.Start(cfg, daemon.Options{Logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	return d, log
}

// hsAddr is the address of listener on d.
func hsAddr(d *daemon.Daemon, listener string) string {
	switch listener {
	case handshake.Peer:
		return d.PeerAddr
	case handshake.API:
		return d.APIAddr
	}
	return d.HTTPAddr
}

// hsKnock is one kind of refused handshake: do knocks on addr and returns
// the client's address. client, if set, is the TLS client config towards
// listener (nil: the kind does not apply there).
type hsKnock struct {
	reason string
	client func(p *hsPKI, listener string) *tls.Config
	do     func(t *testing.T, addr string, cfg *tls.Config) net.Addr
}

// hsBase is a TLS 1.3 client that trusts the cluster's CA.
func hsBase(p *hsPKI, listener string) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	if listener != handshake.HTTP {
		c.NextProtos = []string{"h2"}
	}
	return c
}

// presenting is hsBase presenting cert (whatever CA the server asks for,
// as a node presents its own).
func presenting(cert func(p *hsPKI, listener string) *tls.Certificate) func(p *hsPKI, listener string) *tls.Config {
	return func(p *hsPKI, listener string) *tls.Config {
		crt := cert(p, listener)
		if crt == nil {
			return nil
		}
		c := hsBase(p, listener)
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return crt, nil }
		return c
	}
}

// certOnly: the sidecar asks for no client certificate.
func certOnly(listener string) bool { return listener != handshake.HTTP }

var hsKnocks = []hsKnock{
	{reason: "no_certificate", client: func(p *hsPKI, l string) *tls.Config {
		if !certOnly(l) {
			return nil
		}
		return hsBase(p, l)
	}, do: tlsKnock},
	{reason: "unknown_authority", client: presenting(func(p *hsPKI, l string) *tls.Certificate {
		if !certOnly(l) {
			return nil
		}
		return &p.foreign
	}), do: tlsKnock},
	{reason: "expired", client: presenting(func(p *hsPKI, l string) *tls.Certificate {
		if !certOnly(l) {
			return nil
		}
		return &p.expired
	}), do: tlsKnock},
	// An API client's certificate on the peer port; another cluster's on
	// the API.
	{reason: "wrong_identity", client: presenting(func(p *hsPKI, l string) *tls.Certificate {
		switch l {
		case handshake.Peer:
			return &p.reader
		case handshake.API:
			return &p.alien
		}
		return nil
	}), do: tlsKnock},
	// Bytes that are no certificate (with a valid key to sign with).
	{reason: "bad_certificate", client: presenting(func(p *hsPKI, l string) *tls.Certificate {
		if !certOnly(l) {
			return nil
		}
		return &tls.Certificate{Certificate: [][]byte{[]byte("not a certificate")}, PrivateKey: p.node2.PrivateKey}
	}), do: tlsKnock},
	// A client of another CA refuses the node's certificate.
	{reason: "refused_by_client", client: func(p *hsPKI, l string) *tls.Config {
		c := presenting(func(p *hsPKI, _ string) *tls.Certificate { return &p.node2 })(p, l)
		c.RootCAs = p.other
		return c
	}, do: tlsKnock},
	{reason: "protocol", client: func(p *hsPKI, l string) *tls.Config {
		c := hsBase(p, l)
		c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		return c
	}, do: tlsKnock},
	// An ALPN protocol the port does not speak.
	{reason: "protocol", client: func(p *hsPKI, l string) *tls.Config {
		if !certOnly(l) {
			return nil
		}
		c := presenting(func(p *hsPKI, _ string) *tls.Certificate { return &p.node2 })(p, l)
		c.NextProtos = []string{"spdy/3"}
		return c
	}, do: tlsKnock},
	// No ALPN at all: grpc-go refuses it after the TLS handshake (the L/F
	// pool, on the peer port, takes the client's HTTP/2 preface instead).
	{reason: "protocol", client: func(p *hsPKI, l string) *tls.Config {
		if l != handshake.API {
			return nil
		}
		c := presenting(func(p *hsPKI, _ string) *tls.Certificate { return &p.node2 })(p, l)
		c.NextProtos = nil
		return c
	}, do: tlsKnock},
	{reason: "not_tls", do: plainKnock},
	{reason: "timeout", do: silentKnock},
	{reason: "closed", do: closeKnock},
}

// tlsKnock handshakes with cfg, then reads until the server closes.
func tlsKnock(t *testing.T, addr string, cfg *tls.Config) net.Addr {
	c := dialHS(t, addr)
	tc := tls.Client(c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err == nil {
		// TLS 1.3: the client is done before the server has checked its
		// certificate; the server's verdict follows.
		_, _ = tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		_, _ = io.Copy(io.Discard, tc)
	}
	return c.LocalAddr()
}

// plainKnock sends a plaintext HTTP request; the sidecar answers it with
// 400, as net/http does.
func plainKnock(t *testing.T, addr string, _ *tls.Config) net.Addr {
	c := dialHS(t, addr)
	_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	if strings.HasPrefix(string(b), "HTTP/") && !strings.HasPrefix(string(b), "HTTP/1.0 400 Bad Request") {
		t.Errorf("a plaintext request to %s got %q", addr, b)
	}
	return c.LocalAddr()
}

// silentKnock connects and says nothing until the server closes (at
// handshake-timeout: the reason counted tells).
func silentKnock(t *testing.T, addr string, _ *tls.Config) net.Addr {
	c := dialHS(t, addr)
	_, _ = io.Copy(io.Discard, c)
	return c.LocalAddr()
}

// closeKnock connects and closes at once.
func closeKnock(t *testing.T, addr string, _ *tls.Config) net.Addr {
	c := dialHS(t, addr)
	_ = c.Close()
	return c.LocalAddr()
}

func dialHS(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// refusalLines are the log's refused-handshake lines.
func refusalLines(t *testing.T, log *lockedLog) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "tls: handshake refused" {
			out = append(out, m)
		}
	}
	return out
}

// waitRefused waits until d's /metrics counts want refusals of listener
// and reason, and, for the first (the next ones are within LogEvery), the
// log has a line naming listener, reason and remote.
func waitRefused(t *testing.T, d *daemon.Daemon, log *lockedLog, listener, reason string, want float64, remote net.Addr) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := scrapeOf(t, d).value("tls_handshakes_refused_total", "listener", listener, "reason", reason)
		var line map[string]any
		for _, m := range refusalLines(t, log) {
			if m["listener"] == listener && m["reason"] == reason && m["remote"] == remote.String() {
				line = m
			}
		}
		if line != nil {
			level := "WARN"
			if reason == "closed" {
				level = "DEBUG"
			}
			if line["level"] != level {
				t.Errorf("%s %s logged at %v, want %s", listener, reason, line["level"], level)
			}
		}
		if got == want && (line != nil || want > 1) {
			if line == nil {
				t.Logf("%s %s: %v; not logged again within %v", listener, reason, got, handshake.LogEvery)
			} else {
				t.Logf("%s %s: %v; log: remote %v err %q", listener, reason, got, line["remote"], line["err"])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s from %s: electord_tls_handshakes_refused_total %v, want %v; log line %v; the log:\n%s",
				listener, reason, remote, got, want, line, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goodClients: a client with a valid certificate gets through each
// listener, and is not counted.
func goodClients(t *testing.T, d *daemon.Daemon, p *hsPKI) {
	t.Helper()
	for _, l := range []string{handshake.Peer, handshake.API} {
		cfg := hsBase(p, l)
		cert := p.node2
		cfg.Certificates = []tls.Certificate{cert}
		c := dialHS(t, hsAddr(d, l))
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		// The server's first HTTP/2 frame comes only after it accepted
		// the certificate.
		if _, err := tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if _, err := tc.Read(make([]byte, 9)); err != nil {
			t.Fatalf("%s refused node 2's valid certificate: %v", l, err)
		}
		tc.Close()
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: hsBase(p, handshake.HTTP)}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + d.HTTPAddr + "/healthz")
	if err != nil {
		t.Fatalf("the sidecar over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("the sidecar over TLS: %s, TLS %v", resp.Status, resp.TLS != nil)
	}
}

// TestRefusedHandshakesCountedAndLogged: every kind of refused handshake,
// made by a real client against a real node's peer port (both peer
// servers), API and sidecar (http-tls), is counted under its listener and
// reason in /metrics and logged with the client's address; valid clients
// are not counted, and nothing else is.
func TestRefusedHandshakesCountedAndLogged(t *testing.T) {
	p := newHSPKI(t)
	for _, kind := range []string{"lf", "grpc"} {
		t.Run(kind, func(t *testing.T) {
			d, log := hsNode(t, p, kind)
			listeners := []string{handshake.Peer, handshake.API, handshake.HTTP}
			if kind == "grpc" {
				listeners = listeners[:1] // the API and the sidecar are the same with either
			}
			goodClients(t, d, p)
			want := map[[2]string]float64{}
			for _, l := range listeners {
				for _, k := range hsKnocks {
					var cfg *tls.Config
					if k.client != nil {
						if cfg = k.client(p, l); cfg == nil {
							continue
						}
					}
					remote := k.do(t, hsAddr(d, l), cfg)
					want[[2]string{l, k.reason}]++
					waitRefused(t, d, log, l, k.reason, want[[2]string{l, k.reason}], remote)
				}
			}
			s := scrapeOf(t, d)
			f := s["electord_tls_handshakes_refused_total"]
			for _, m := range f.GetMetric() {
				var key [2]string
				for _, lp := range m.GetLabel() {
					switch lp.GetName() {
					case "listener":
						key[0] = lp.GetValue()
					case "reason":
						key[1] = lp.GetValue()
					}
				}
				if got := m.GetCounter().GetValue(); got != want[key] {
					t.Errorf("electord_tls_handshakes_refused_total%v = %v, want %v", key, got, want[key])
				}
			}
			if n := len(f.GetMetric()); n != 3*len(handshake.Reasons()) {
				t.Errorf("%d series, want every reason of peer, api and http (%d)", n, 3*len(handshake.Reasons()))
			}
		})
	}
}

// TestRefusedHandshakeFloodIsLoggedBounded: 150 bad handshakes on each
// listener are all counted, and logged in at most one line per listener
// per handshake.LogEvery.
func TestRefusedHandshakeFloodIsLoggedBounded(t *testing.T) {
	p := newHSPKI(t)
	d, log := hsNode(t, p, "lf")
	const n = 150
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range []string{handshake.Peer, handshake.API, handshake.HTTP} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				c, err := net.DialTimeout("tcp", hsAddr(d, l), 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}
		}()
	}
	wg.Wait()
	for _, l := range []string{handshake.Peer, handshake.API, handshake.HTTP} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got := scrapeOf(t, d).value("tls_handshakes_refused_total", "listener", l, "reason", "not_tls")
			if got == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v refusals counted, want %d", l, got, n)
			}
		}
	}
	elapsed := time.Since(start)
	bound := 1 + int(elapsed/handshake.LogEvery)
	lines := map[string]int{}
	for _, m := range refusalLines(t, log) {
		lines[m["listener"].(string)]++
	}
	for _, l := range []string{handshake.Peer, handshake.API, handshake.HTTP} {
		if lines[l] < 1 || lines[l] > bound {
			t.Errorf("%s: %d log lines for %d refusals in %v, want 1 to %d", l, lines[l], n, elapsed, bound)
		}
	}
	t.Logf("%d refusals per listener in %v: log lines %v", n, elapsed.Round(time.Millisecond), lines)
}
