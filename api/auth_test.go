package api_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/election"
	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
)

// securePKI is a CA with certificates for nodes 1 and 2, a reader and an
// admin.
type securePKI struct {
	dir string
	ca  *security.CA
}

func newSecurePKI(t *testing.T) securePKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, "prod", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return securePKI{dir, ca}
}

func (p securePKI) material(t *testing.T, role security.Role, name string, id uint64, poll time.Duration) *security.Material {
	t.Helper()
	var crt, key string
	var err error
	if role == security.RoleNode {
		crt, key, err = p.ca.IssueNode(p.dir, id, []string{"127.0.0.1"}, time.Hour)
	} else if role != "" {
		crt, key, err = p.ca.IssueClient(p.dir, name, role == security.RoleAdmin, time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := security.Load(security.Files{CA: p.dir + "/" + security.CACertFile, Cert: crt, Key: key}, security.Options{Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

type secureCluster struct {
	c    *apitest.Cluster
	pki  securePKI
	addr map[election.NodeID]string
	sec  map[election.NodeID]*api.Security
	node map[election.NodeID]*security.Material
}

// serveSecure serves nodes 1 and 2 of a fake cluster with TLS and
// authorization; node 1 leads.
func serveSecure(t *testing.T) *secureCluster {
	t.Helper()
	sc := &secureCluster{c: apitest.NewCluster(2), pki: newSecurePKI(t), addr: map[election.NodeID]string{},
		sec: map[election.NodeID]*api.Security{}, node: map[election.NodeID]*security.Material{}}
	sc.c.Elect(1)
	for _, id := range []election.NodeID{1, 2} {
		m := sc.pki.material(t, security.RoleNode, "", uint64(id), 20*time.Millisecond)
		sec := &api.Security{ServerTLS: m.ServerConfig(), Forward: m.ForwardCredentials, Cluster: "prod"}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.NewSecureGRPCServer(sc.c.Node(id), apitest.Limits(), sec)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		sc.addr[id], sc.sec[id], sc.node[id] = lis.Addr().String(), sec, m
		sc.c.SetAPIAddr(id, lis.Addr().String())
	}
	return sc
}

func dialWith(t *testing.T, addr string, creds credentials.TransportCredentials) electordv1.ElectorClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return electordv1.NewElectorClient(conn)
}

func (sc *secureCluster) as(t *testing.T, role security.Role, name string) electordv1.ElectorClient {
	m := sc.pki.material(t, role, name, 9, -1)
	return dialWith(t, sc.addr[1], credentials.NewTLS(m.ClientConfig()))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSecureKillWithoutCertificateRefused(t *testing.T) {
	sc := serveSecure(t)
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":           insecure.NewCredentials(),
		"TLS, no client cert": credentials.NewTLS(sc.pki.material(t, "", "", 0, -1).ClientConfig()),
	} {
		_, err := dialWith(t, sc.addr[1], creds).Kill(ctx(t), &electordv1.KillRequest{Id: 2})
		if err == nil {
			t.Errorf("%s: kill accepted", name)
		}
		if grpcstatus.Code(err) != codes.Unavailable {
			t.Errorf("%s: err = %v, want Unavailable (the connection is refused)", name, err)
		}
	}
	if sc.c.Killed(2) {
		t.Fatal("node 2 was killed")
	}
}

func TestSecureReaderMayReadNotCommand(t *testing.T) {
	sc := serveSecure(t)
	cl := sc.as(t, security.RoleClient, "web")
	if li, err := cl.GetLeader(ctx(t), &electordv1.GetLeaderRequest{}); err != nil || li.GetId() != 1 {
		t.Fatalf("GetLeader = %v, %v", li, err)
	}
	if _, err := cl.Status(ctx(t), &electordv1.StatusRequest{}); err != nil {
		t.Fatalf("Status: %v", err)
	}
	if _, err := cl.Members(ctx(t), &electordv1.MembersRequest{}); err != nil {
		t.Fatalf("Members: %v", err)
	}
	w, err := cl.WatchLeader(ctx(t), &electordv1.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || ev.GetLeader().GetId() != 1 {
		t.Fatalf("WatchLeader: %v, %v", ev, err)
	}
	calls := map[string]func() error{
		"Kill":     func() error { _, err := cl.Kill(ctx(t), &electordv1.KillRequest{Id: 2}); return err },
		"Revive":   func() error { _, err := cl.Revive(ctx(t), &electordv1.ReviveRequest{Id: 2}); return err },
		"Resign":   func() error { _, err := cl.Resign(ctx(t), &electordv1.ResignRequest{}); return err },
		"Transfer": func() error { _, err := cl.Transfer(ctx(t), &electordv1.TransferRequest{Id: 2}); return err },
	}
	for name, call := range calls {
		err := call()
		if grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "admin role is required") {
			t.Errorf("%s as a client: %v, want PermissionDenied naming the admin role", name, err)
		}
	}
	if got := sc.sec[1].Denied(); got != 4 {
		t.Errorf("Denied() = %d, want 4", got)
	}
	if sc.c.Killed(2) || sc.c.Node(1).Leader().ID != 1 {
		t.Fatal("a refused command acted")
	}
}

// An admin's kill of node 2, sent to node 1, is forwarded with node 1's
// certificate and accepted by node 2.
func TestSecureAdminCommandsForwarded(t *testing.T) {
	sc := serveSecure(t)
	cl := sc.as(t, security.RoleAdmin, "alice")
	if _, err := cl.Kill(ctx(t), &electordv1.KillRequest{Id: 2}); err != nil {
		t.Fatalf("Kill(2) as admin: %v", err)
	}
	if !sc.c.Killed(2) {
		t.Fatal("node 2 not killed")
	}
	if _, err := cl.Revive(ctx(t), &electordv1.ReviveRequest{Id: 2}); err != nil {
		t.Fatalf("Revive(2) as admin: %v", err)
	}
	// Transfer sent to the follower goes to the leader.
	cl2 := dialWith(t, sc.addr[2], credentials.NewTLS(sc.pki.material(t, security.RoleAdmin, "bob", 0, -1).ClientConfig()))
	if _, err := cl2.Transfer(ctx(t), &electordv1.TransferRequest{Id: 2}); err != nil {
		t.Fatalf("Transfer(2) via node 2: %v", err)
	}
	if sc.sec[1].Denied()+sc.sec[2].Denied() != 0 {
		t.Fatalf("denied %d, %d", sc.sec[1].Denied(), sc.sec[2].Denied())
	}
}

// A node identity may only forward: on its own account it is refused.
func TestSecureNodeMayOnlyForward(t *testing.T) {
	sc := serveSecure(t)
	cl := dialWith(t, sc.addr[1], credentials.NewTLS(sc.node[2].ClientConfig()))
	_, err := cl.Resign(ctx(t), &electordv1.ResignRequest{})
	if grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "may only forward") {
		t.Fatalf("Resign by node 2 = %v, want PermissionDenied", err)
	}
	fctx := metadata.AppendToOutgoingContext(ctx(t), api.ForwardedKey, "2")
	if _, err := cl.Resign(fctx, &electordv1.ResignRequest{}); err != nil {
		t.Fatalf("forwarded Resign by node 2: %v", err)
	}
}

// The API serves a certificate replaced on disk without a restart.
func TestSecureCertificateRotation(t *testing.T) {
	sc := serveSecure(t)
	serial := func() string {
		conf := sc.pki.material(t, security.RoleClient, "probe", 0, -1).ClientConfig()
		conf.ServerName = "127.0.0.1"
		c, err := tls.Dial("tcp", sc.addr[1], conf)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	time.Sleep(10 * time.Millisecond)
	if _, _, err := sc.pki.ca.IssueNode(sc.pki.dir, 1, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for serial() == before {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := sc.as(t, security.RoleClient, "web").GetLeader(ctx(t), &electordv1.GetLeaderRequest{}); err != nil {
		t.Fatalf("GetLeader after the rotation: %v", err)
	}
}
