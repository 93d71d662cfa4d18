package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/peerauth"
	"github.com/electord/electord/transport/peerauth/peerauthtest"
)

const tlsCluster = "test-cluster"

// peerServerKinds are the two peer servers.
var peerServerKinds = []string{"grpc", "lf"}

// startTLSServer serves svc with mutual TLS (server config serverTLS) on
// the given kind of peer server, until the test ends.
func startTLSServer(t *testing.T, kind string, svc *PeerService, serverTLS *tls.Config) string {
	t.Helper()
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	switch kind {
	case "grpc":
		gs := NewGRPCServer(svc, maxMsg, grpc.Creds(credentials.NewTLS(serverTLS)))
		go func() { defer close(done); _ = gs.Serve(lis) }()
		t.Cleanup(func() { gs.Stop(); <-done })
	case "lf":
		reg := engine.NewRegistry()
		pb.RegisterPeerServer(reg, svc)
		d := config.Default()
		ls, err := lf.New(reg, lf.Config{Workers: 2, TLS: serverTLS, MaxConns: d.MaxConns, HandshakeTimeout: d.HandshakeTimeout,
			IdleTimeout: d.IdleTimeout, MaxBufferedBytes: d.PeerMaxBufferedBytes,
			Limits: engine.Limits{MaxRecvMsgBytes: d.MaxMessageBytes, MaxConcurrentStreams: uint32(d.PeerMaxStreams),
				MaxHeaderListBytes: uint32(d.MaxHeaderListBytes)}})
		if errors.Is(err, lf.ErrUnsupported) {
			lis.Close()
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		go func() { defer close(done); _ = ls.Serve(lis) }()
		t.Cleanup(func() { ls.Stop(); <-done })
	}
	return lis.Addr().String()
}

// tlsNode is one node's certificate material.
type tlsNode struct {
	server, base *tls.Config // peerauth.ServerConfig, and the base for clients
}

func newTLSNodes(t *testing.T, ids ...election.NodeID) (*peerauthtest.CA, map[election.NodeID]tlsNode) {
	t.Helper()
	ca, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[election.NodeID]tlsNode{}
	for _, id := range ids {
		b, err := ca.NodeBase(tlsCluster, id)
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = tlsNode{server: peerauth.ServerConfig(b, tlsCluster), base: b}
	}
	return ca, nodes
}

// TestTLSBothServers: with mutual TLS on either peer server, every message
// type goes through and a heartbeat's reply comes back; a message whose
// From is not the certificate's node is refused with PermissionDenied and
// counted; a transport that dials node 3 but reaches node 2 refuses the
// connection (the client-side check); a client without a certificate, and
// a plaintext client, get nothing through.
func TestTLSBothServers(t *testing.T) {
	for _, kind := range peerServerKinds {
		t.Run(kind, func(t *testing.T) {
			ca, nodes := newTLSNodes(t, 1, 2)
			srvRecv := newFakeReceiver(2)
			svc := NewPeerService(2, srvRecv)
			svc.BindIdentity(tlsCluster)
			addr := startTLSServer(t, kind, svc, nodes[2].server)

			cli := newFakeReceiver(1)
			tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli, TLS: nodes[1].base, Cluster: tlsCluster})
			tr.SetPeer(2, addr)
			for _, m := range sampleMessages(1, 2) {
				tr.Send(m)
				if in := srvRecv.next(t); !reflect.DeepEqual(in.Msg, m) {
					t.Errorf("%v arrived as %+v", m.Type, in.Msg)
				}
				if m.Type == election.MsgHeartbeat {
					if r := cli.next(t); r.Msg.Type != election.MsgHeartbeatResp || r.Msg.From != 2 {
						t.Errorf("heartbeat reply %+v", r.Msg)
					}
				}
			}
			cli.noFailure(t)

			// Node 1's certificate, a message that says it is from node 3.
			forged := election.Message{Type: election.MsgCoordinator, From: 3, To: 2, Term: 9, Leader: 3}
			tr.Send(forged)
			f := cli.nextFailure(t)
			wantCode(t, f, codes.PermissionDenied)
			if !strings.Contains(f.err.Error(), "names node 1") {
				t.Errorf("refusal %q does not name the certificate's node", f.err)
			}
			if st := svc.Stats(); st.RejectedIdentity != 1 || st.Received[election.MsgCoordinator] != 1 {
				t.Errorf("server stats %+v", st)
			}

			// Node 1 means node 3 but the address is node 2's.
			tr.SetPeer(3, addr)
			tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 3, Term: 9})
			f = cli.nextFailure(t)
			wantCode(t, f, codes.Unavailable)
			if !strings.Contains(f.err.Error(), "dialled node 3 but the server's certificate names node 2") {
				t.Errorf("wrong node: %v", f.err)
			}

			// No client certificate; no TLS at all.
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			for name, creds := range map[string]credentials.TransportCredentials{
				"no certificate": credentials.NewTLS(peerauth.ClientConfig(&tls.Config{RootCAs: ca.Pool}, tlsCluster, 2)),
				"plaintext":      insecure.NewCredentials(),
			} {
				cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
				if err != nil {
					t.Fatal(err)
				}
				_, err = pb.NewPeerClient(cc).Answer(ctx, &pb.Answer{From: 1, To: 2, Term: 9})
				cc.Close()
				if status.Code(err) != codes.Unavailable {
					t.Errorf("%s: %v, want Unavailable", name, err)
				}
			}
			if st := svc.Stats(); st.Received[election.MsgAnswer] != 1 {
				t.Errorf("server received %d Answers, want 1", st.Received[election.MsgAnswer])
			}
		})
	}
}

// TestTLSUnboundServiceFailsClosed: a service that was never told the
// cluster (BindIdentity) refuses every call that came over TLS.
func TestTLSUnboundServiceFailsClosed(t *testing.T) {
	for _, kind := range peerServerKinds {
		t.Run(kind, func(t *testing.T) {
			_, nodes := newTLSNodes(t, 1, 2)
			svc := NewPeerService(2, newFakeReceiver(2))
			addr := startTLSServer(t, kind, svc, nodes[2].server)
			cli := newFakeReceiver(1)
			tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli, TLS: nodes[1].base, Cluster: tlsCluster})
			tr.SetPeer(2, addr)
			tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 9})
			wantCode(t, cli.nextFailure(t), codes.PermissionDenied)
		})
	}
}

func TestGRPCConfigTLSNeedsCluster(t *testing.T) {
	_, err := NewGRPC(GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: newFakeReceiver(1), TLS: &tls.Config{}})
	if err == nil {
		t.Fatal("TLS without Cluster accepted")
	}
}
