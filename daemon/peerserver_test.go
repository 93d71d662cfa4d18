package daemon

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/peerauth/peerauthtest"
)

// inbox is a transport.Receiver that keeps what it is given.
type inbox struct {
	got    chan transport.Inbound
	failed chan error
}

func (r inbox) Receive(in transport.Inbound) error   { r.got <- in; return nil }
func (r inbox) Failed(_ election.Message, err error) { r.failed <- err }

// TestPeerTLSHook: the hook Start calls with the node's peer TLS material
// sets the transport's TLS, binds the service to the cluster and serves
// mutual TLS with either server; a peer with the cluster's certificate
// gets through, a forged From does not.
func TestPeerTLSHook(t *testing.T) {
	if peerTLSHook == nil {
		t.Fatal("peerTLSHook is not set")
	}
	const cluster = "hook-test"
	ca, err := peerauthtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	material := func(id election.NodeID) PeerTLS {
		b, err := ca.NodeBase(cluster, id)
		if err != nil {
			t.Fatal(err)
		}
		return PeerTLS{Cluster: cluster, Server: b, Client: b}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, kind := range []string{"grpc", "lf"} {
		t.Run(kind, func(t *testing.T) {
			srvIn := inbox{got: make(chan transport.Inbound, 8), failed: make(chan error, 8)}
			var stc transport.GRPCConfig
			svc := transport.NewPeerService(2, srvIn)
			srv := peerTLSHook(material(2), nodeConfig(func(c *config.Config) { c.PeerServer = kind }), &stc, svc, log)
			if srv == nil || stc.TLS == nil || stc.Cluster != cluster {
				t.Fatalf("hook: server %v, transport TLS %v, cluster %q", srv, stc.TLS != nil, stc.Cluster)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); _ = srv.Serve(lis) }()
			defer func() { srv.Stop(); <-done }()

			cliIn := inbox{got: make(chan transport.Inbound, 8), failed: make(chan error, 8)}
			ctc := transport.GRPCConfig{Self: 1, Receiver: cliIn, SendTimeout: 5 * time.Second, MaxMessageBytes: maxMsg}
			peerTLSHook(material(1), nodeConfig(func(c *config.Config) { c.PeerServer = kind }), &ctc, transport.NewPeerService(1, cliIn), log)
			tr, err := transport.NewGRPC(ctc)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			tr.SetPeer(2, lis.Addr().String())
			tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 5})
			select {
			case in := <-srvIn.got:
				if in.Msg.From != 1 {
					t.Fatalf("got %+v", in.Msg)
				}
			case err := <-cliIn.failed:
				t.Fatalf("send failed: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("nothing arrived")
			}
			tr.Send(election.Message{Type: election.MsgAnswer, From: 3, To: 2, Term: 5})
			select {
			case err := <-cliIn.failed:
				t.Logf("forged From refused: %v", err)
			case in := <-srvIn.got:
				t.Fatalf("forged message delivered: %+v", in.Msg)
			case <-time.After(10 * time.Second):
				t.Fatal("no answer to the forged message")
			}
			if st := svc.Stats(); st.RejectedIdentity != 1 {
				t.Errorf("server stats %+v", st)
			}
		})
	}
}
