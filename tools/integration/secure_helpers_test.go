package integration

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/electord/electord/client"
	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/transport/peerauth"
)

// Helpers of secure_cluster_test.go: a cluster of real electord processes
// with certificates from `electord certs`, one gossip key file per node,
// and the means to watch, rotate and attack it.

// secureClusterName is the name of the cluster the tests' CA is made for.
const secureClusterName = "itest"

// netDialer dials the nodes' TLS ports.
var netDialer = net.Dialer{Timeout: 5 * time.Second}

// pki is a directory of `electord certs` output.
type pki struct {
	dir string
}

// certs runs `electord certs <args> --dir dir` and fails the test if it
// does not exit 0.
func (k pki) certs(t *testing.T, args ...string) {
	t.Helper()
	args = append([]string{"certs"}, append(args, "--dir", k.dir)...)
	if code, out := runElectord(t, args...); code != 0 {
		t.Fatalf("electord %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
}

func (k pki) ca() string                 { return filepath.Join(k.dir, "ca.crt") }
func (k pki) nodeCert(id int) string     { return filepath.Join(k.dir, fmt.Sprintf("node-%d.crt", id)) }
func (k pki) nodeKey(id int) string      { return filepath.Join(k.dir, fmt.Sprintf("node-%d.key", id)) }
func (k pki) clientCert(n string) string { return filepath.Join(k.dir, "client-"+n+".crt") }
func (k pki) clientKey(n string) string  { return filepath.Join(k.dir, "client-"+n+".key") }

// newPKI makes a CA, node certificates for ids (127.0.0.1 and localhost), a
// reader ("web") and an admin ("alice").
func newPKI(t *testing.T, ids ...int) pki {
	t.Helper()
	k := pki{dir: filepath.Join(t.TempDir(), "certs")}
	k.certs(t, "ca", "--cluster", secureClusterName)
	for _, id := range ids {
		k.issueNode(t, id)
	}
	k.certs(t, "client", "--name", "web")
	k.certs(t, "client", "--name", "alice", "--admin")
	return k
}

// issueNode (re)issues node id's certificate and key; electord certs
// replaces both files atomically.
func (k pki) issueNode(t *testing.T, id int) {
	t.Helper()
	k.certs(t, "node", "--id", fmt.Sprint(id), "--host", "127.0.0.1,localhost")
}

// serialOf is the serial number of the first certificate in file.
func serialOf(t *testing.T, file string) *big.Int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c.SerialNumber
}

func (k pki) pool(t *testing.T) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(k.ca())
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", k.ca())
	}
	return p
}

func (k pki) pair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apiSerial dials addr's client API with the reader certificate and
// returns the serial number of the certificate the node serves.
func (k pki) apiSerial(addr string, pool *x509.CertPool, reader tls.Certificate) (*big.Int, error) {
	host, _, _ := strings.Cut(addr, ":")
	c, err := tls.DialWithDialer(&netDialer, "tcp", addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool,
		ServerName: host, NextProtos: []string{"h2"}, Certificates: []tls.Certificate{reader}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// peerSerial dials node id's peer port at addr as node `as` (its
// certificate) and returns the serial number of the certificate served.
func (k pki) peerSerial(addr string, id int, pool *x509.CertPool, as tls.Certificate) (*big.Int, error) {
	cfg := peerauth.ClientConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{as}}, secureClusterName, election.NodeID(id))
	c, err := tls.DialWithDialer(&netDialer, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// writeFileAtomic replaces path with data, as cert-manager or a Secret
// volume would.
func writeFileAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// newGossipKey is a fresh base64 32-byte gossip key.
func newGossipKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// startSecureProcs starts n electord processes of alg with mTLS (their
// certificates from k) and a gossip key file each (holding key), node 1
// first and the others joining it. Their clients (p.cl) use the reader
// certificate. They are stopped, and their logs printed on failure, when
// the test ends.
func startSecureProcs(t *testing.T, k pki, n int, alg, key string, extra ...string) []*proc {
	t.Helper()
	dir := t.TempDir()
	var ps []*proc
	for i := 1; i <= n; i++ {
		ps = append(ps, newSecureProc(t, k, dir, i, alg, key, extra...))
	}
	cleanupProcs(t, ps)
	startJoined(ps)
	return ps
}

// newSecureProc is node id of a secure cluster, not started: its
// certificate from k, a gossip key file in dir holding key, a reader's
// client, and extra flags.
func newSecureProc(t *testing.T, k pki, dir string, id int, alg, key string, extra ...string) *proc {
	t.Helper()
	p := newProc(t, dir, id, alg)
	p.cl = newTLSClient(t, k, "web", p.api)
	kf := gossipKeyFile(dir, id)
	if err := os.WriteFile(kf, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.extra = append([]string{"--tls-ca", k.ca(), "--tls-cert", k.nodeCert(id), "--tls-key", k.nodeKey(id),
		"--gossip-key-file", kf}, extra...)
	return p
}

func gossipKeyFile(dir string, id int) string {
	return filepath.Join(dir, fmt.Sprintf("node-%d-gossip.key", id))
}

// newTLSClient is a client of endpoints with the CA and client name's
// certificate ("" for none), closed when the test ends.
func newTLSClient(t *testing.T, k pki, name string, endpoints ...string) *client.Client {
	t.Helper()
	cert, key := "", ""
	if name != "" {
		cert, key = k.clientCert(name), k.clientKey(name)
	}
	c, err := client.NewWithOptions(endpoints, client.WithDialTimeout(time.Second),
		client.WithBackoff(50*time.Millisecond, 500*time.Millisecond), client.WithTLSFiles(k.ca(), cert, key))
	if err != nil {
		t.Fatalf("client.New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// membersComplete reports whether every process of ps lists every id of
// ps as an alive member.
func membersComplete(ps []*proc) (bool, string) {
	var b strings.Builder
	ok := true
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ms, err := p.cl.Members(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "%d:error(%v) ", p.id, err)
			ok = false
			continue
		}
		alive := map[int]bool{}
		var ids []string
		for _, m := range ms {
			if m.Alive {
				alive[int(m.ID)] = true
				ids = append(ids, fmt.Sprint(m.ID))
			}
		}
		fmt.Fprintf(&b, "%d:[%s] ", p.id, strings.Join(ids, ","))
		for _, q := range ps {
			if !alive[q.id] {
				ok = false
			}
		}
	}
	return ok, b.String()
}

// leaderWatch records every leadership view each process reports on a
// WatchLeader stream, from when it is started until the test ends.
type leaderWatch struct {
	mu    sync.Mutex
	views map[int][]client.LeaderInfo
	first map[int]chan struct{}
}

// watchLeaders starts a watch on every process of ps and waits until each
// has delivered its first view.
func watchLeaders(t *testing.T, ps []*proc) *leaderWatch {
	t.Helper()
	w := &leaderWatch{views: map[int][]client.LeaderInfo{}, first: map[int]chan struct{}{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, p := range ps {
		first := make(chan struct{})
		w.first[p.id] = first
		wg.Add(1)
		go func(id int, ch <-chan client.Event) {
			defer wg.Done()
			once := sync.Once{}
			for ev := range ch {
				if ev.Err != nil {
					continue
				}
				w.mu.Lock()
				w.views[id] = append(w.views[id], ev.Leader)
				w.mu.Unlock()
				once.Do(func() { close(first) })
			}
		}(p.id, p.cl.Watch(ctx))
	}
	for id, ch := range w.first {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("node %d's WatchLeader stream delivered nothing within 10s", id)
		}
	}
	return w
}

// changes describes every view that is not leader l at l's term, "" if
// none.
func (w *leaderWatch) changes(l client.LeaderInfo) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for id, vs := range w.views {
		for _, v := range vs {
			if v.ID != l.ID || v.Term != l.Term {
				fmt.Fprintf(&b, "node %d saw leader %d at %v (%s); ", id, v.ID, v.Term, v.State)
			}
		}
	}
	return b.String()
}

// saw reports whether node id reported a view for which f holds.
func (w *leaderWatch) saw(id int, f func(client.LeaderInfo) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.views[id] {
		if f(v) {
			return true
		}
	}
	return false
}

func (w *leaderWatch) describe(id int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, v := range w.views[id] {
		fmt.Fprintf(&b, "%d@%v/%s ", v.ID, v.Term, v.State)
	}
	return b.String()
}

// holdsFor checks, for d, that no process reports anything but leader l at
// l's term, and that they still agree on it at the end. It is the one
// place these tests watch for an absence over a window.
func holdsFor(t *testing.T, ps []*proc, w *leaderWatch, l client.LeaderInfo, d time.Duration, what string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c := w.changes(l); c != "" {
			t.Fatalf("%s: the leadership moved from node %d at %v: %s", what, l.ID, l.Term, c)
		}
	}
	now := waitProcAgreement(t, ps, 5*time.Second, what+": agreement", nil)
	if now.ID != l.ID || now.Term != l.Term {
		t.Fatalf("%s: leader %d at %v, was %d at %v", what, now.ID, now.Term, l.ID, l.Term)
	}
	if c := w.changes(l); c != "" {
		t.Fatalf("%s: the leadership moved from node %d at %v: %s", what, l.ID, l.Term, c)
	}
}

// countIn counts the lines of p's log holding every one of subs.
func countIn(p *proc, subs ...string) int {
	n := 0
next:
	for _, line := range strings.Split(p.log(), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

// waitLog waits until p's log has at least n lines holding every one of
// subs.
func waitLog(t *testing.T, p *proc, timeout time.Duration, n int, subs ...string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("node %d logs %d× %q", p.id, n, subs), func() (bool, string) {
		c := countIn(p, subs...)
		return c >= n, fmt.Sprintf("%d such lines", c)
	})
}

// peerConn is a gRPC client of a peer port with creds.
func peerConn(t *testing.T, addr string, creds credentials.TransportCredentials) pb.PeerClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewPeerClient(cc)
}

// peerCreds are the credentials to dial node id's peer port presenting
// cert (nil: none).
func (k pki) peerCreds(t *testing.T, id int, cert *tls.Certificate) credentials.TransportCredentials {
	b := &tls.Config{RootCAs: k.pool(t)}
	if cert != nil {
		b.Certificates = []tls.Certificate{*cert}
	}
	return credentials.NewTLS(peerauth.ClientConfig(b, secureClusterName, election.NodeID(id)))
}

// termOf is the term of epoch owned by node id.
func termOf(epoch uint64, id int) uint64 {
	return epoch<<election.SlotBits | uint64(id)&(1<<election.SlotBits-1)
}
