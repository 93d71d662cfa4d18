package security_test

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/security"
)

func TestParseURI(t *testing.T) {
	good := map[string]security.Identity{
		"spiffe://prod/node/3":      {Cluster: "prod", Role: security.RoleNode, NodeID: 3, Name: "3"},
		"spiffe://prod/client/web":  {Cluster: "prod", Role: security.RoleClient, Name: "web"},
		"spiffe://prod/admin/alice": {Cluster: "prod", Role: security.RoleAdmin, Name: "alice"},
	}
	for s, want := range good {
		got, err := security.ParseURI(s)
		if err != nil || got != want {
			t.Errorf("ParseURI(%q) = %+v, %v; want %+v", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("String() = %q, want %q", got.String(), s)
		}
	}
	bad := map[string]string{
		"https://prod/node/3":       "scheme",
		"spiffe:///node/3":          "cluster name is empty",
		"spiffe://prod/node/0":      "node id",
		"spiffe://prod/node/x":      "node id",
		"spiffe://prod/root/alice":  "role",
		"spiffe://prod/admin":       "path",
		"spiffe://prod/client/a/b":  "path",
		"spiffe://prod/client/a%20": "only letters",
	}
	for s, want := range bad {
		if _, err := security.ParseURI(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURI(%q) err = %v, want one mentioning %q", s, err, want)
		}
	}
}

type pki struct {
	dir string
	ca  *security.CA
}

func newPKI(t *testing.T, cluster string) pki {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, cluster, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pki{dir, ca}
}

func (p pki) node(t *testing.T, id uint64) security.Files {
	t.Helper()
	crt, key, err := p.ca.IssueNode(p.dir, id, []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return security.Files{CA: p.dir + "/ca.crt", Cert: crt, Key: key}
}

func (p pki) client(t *testing.T, name string, admin bool) security.Files {
	t.Helper()
	crt, key, err := p.ca.IssueClient(p.dir, name, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return security.Files{CA: p.dir + "/ca.crt", Cert: crt, Key: key}
}

func TestCreateCARefusesToReplace(t *testing.T) {
	p := newPKI(t, "prod")
	if _, err := security.CreateCA(p.dir, "prod", time.Hour); err == nil {
		t.Fatal("a second CreateCA in the same dir succeeded")
	}
	ca, err := security.LoadCA(p.dir)
	if err != nil || ca.Cluster != "prod" {
		t.Fatalf("LoadCA = %v, %v", ca, err)
	}
}

func TestLoadChecksIdentity(t *testing.T) {
	p := newPKI(t, "prod")
	f := p.node(t, 3)
	m, err := security.Load(f, security.Options{Role: security.RoleNode, NodeID: 3, Cluster: "prod", Poll: -1})
	if err != nil {
		t.Fatal(err)
	}
	if id := m.Identity(); id != security.NodeIdentity("prod", 3) {
		t.Fatalf("Identity = %v", id)
	}
	for name, tc := range map[string]struct {
		f    security.Files
		o    security.Options
		want string
	}{
		"other id":      {f, security.Options{NodeID: 4}, "names node 3"},
		"other cluster": {f, security.Options{Cluster: "staging"}, `cluster is "staging"`},
		"client cert":   {p.client(t, "web", false), security.Options{Role: security.RoleNode}, "client certificate"},
		"other CA":      {security.Files{CA: newPKI(t, "prod").dir + "/ca.crt", Cert: f.Cert, Key: f.Key}, security.Options{}, "not signed by tls-ca"},
		"no CA":         {security.Files{Cert: f.Cert, Key: f.Key}, security.Options{}, "tls-ca"},
		"cert only":     {security.Files{CA: f.CA, Cert: f.Cert}, security.Options{}, "go together"},
	} {
		tc.o.Poll = -1
		if _, err := security.Load(tc.f, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", name, err, tc.want)
		}
	}
}

// handshake runs a TLS handshake between a server and a client config and
// returns the client's error, or the server's.
func handshake(t *testing.T, srv, cli *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srvErr := make(chan error, 1)
	go func() {
		s := tls.Server(a, srv)
		srvErr <- s.Handshake()
		s.Close()
	}()
	cli = cli.Clone()
	cli.ServerName = "127.0.0.1"
	c := tls.Client(b, cli)
	err := c.Handshake()
	st := c.ConnectionState()
	if err == nil {
		// TLS 1.3: the server checks the client's certificate after the
		// client finished; read to see its verdict.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() || err != nil && strings.Contains(err.Error(), "EOF") {
			err = nil
		}
	}
	if serr := <-srvErr; err == nil {
		err = serr
	}
	return st, err
}

func TestHandshakes(t *testing.T) {
	p := newPKI(t, "prod")
	node, err := security.Load(p.node(t, 1), security.Options{Poll: -1})
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := security.Load(p.client(t, "web", false), security.Options{Poll: -1})
	anon, _ := security.Load(security.Files{CA: p.dir + "/ca.crt"}, security.Options{Poll: -1})
	other := newPKI(t, "prod")
	stranger, _ := security.Load(other.client(t, "eve", true), security.Options{Poll: -1})

	if _, err := handshake(t, node.ServerConfig(), reader.ClientConfig()); err != nil {
		t.Errorf("client cert: %v", err)
	}
	if _, err := handshake(t, node.ServerConfig(), anon.ClientConfig()); err == nil {
		t.Error("no client certificate: accepted")
	}
	if _, err := handshake(t, node.ServerConfig(), stranger.ClientConfig()); err == nil {
		t.Error("a certificate of another CA: accepted")
	}
	// Clients check they talk to a node: a client certificate cannot serve.
	if _, err := handshake(t, reader.ServerConfig(), node.ClientConfig()); err == nil {
		t.Error("a client certificate served and was accepted")
	}
}

// A certificate replaced on disk is used for the next handshake, without
// a new Material or config.
func TestReloadOnChange(t *testing.T) {
	p := newPKI(t, "prod")
	f := p.node(t, 1)
	m, err := security.Load(f, security.Options{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reader, _ := security.Load(p.client(t, "web", false), security.Options{Poll: -1})
	srv, cli := m.ServerConfig(), reader.ClientConfig()
	st, err := handshake(t, srv, cli)
	if err != nil {
		t.Fatal(err)
	}
	before := st.PeerCertificates[0].SerialNumber
	time.Sleep(10 * time.Millisecond) // a new mtime
	p.node(t, 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := handshake(t, srv, cli)
		if err != nil {
			t.Fatal(err)
		}
		if st.PeerCertificates[0].SerialNumber.Cmp(before) != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A broken file keeps the old material.
	if err := writeFile(f.Cert, "garbage"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reload(); err == nil {
		time.Sleep(50 * time.Millisecond) // the poller may have read it first
	}
	if _, err := handshake(t, srv, cli); err != nil {
		t.Fatalf("after a broken file: %v", err)
	}
}
