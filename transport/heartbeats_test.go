package transport

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
)

// namedHeartbeats is n Heartbeats from 1 to its leader 2, one per election.
func namedHeartbeats(n int) []election.Message {
	term := election.NextTerm(0, 2)
	ms := make([]election.Message, n)
	for i := range ms {
		ms[i] = election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: term, Leader: 2, Election: fmt.Sprintf("jobs-%03d", i)}
	}
	return ms
}

// countCalls counts the server's unary calls by method.
func countCalls(n *atomic.Int64, method string) grpc.ServerOption {
	return grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == method {
			n.Add(1)
		}
		return h(ctx, req)
	})
}

// sendHeld sends ms with the receiver held at the first one, so the rest
// queue behind its call, as a tick's heartbeats do behind a busy peer.
func sendHeld(t *testing.T, srv *fakeReceiver, tr *GRPC, ms []election.Message) {
	t.Helper()
	release, entered := make(chan struct{}), make(chan struct{}, len(ms))
	srv.mu.Lock()
	srv.block, srv.entered = release, entered
	srv.mu.Unlock()
	tr.Send(ms[0])
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the first heartbeat did not arrive")
	}
	for _, m := range ms[1:] {
		tr.Send(m)
	}
	srv.mu.Lock()
	srv.block, srv.entered = nil, nil
	srv.mu.Unlock()
	close(release)
}

// The named Heartbeats queued for one peer go in one call (a Batch, to a
// peer that takes them there), each delivered with its own reply channel
// and each answer handed back.
func TestGRPCCoalescesNamedHeartbeats(t *testing.T) {
	srv := newFakeReceiver(2)
	var calls, single atomic.Int64
	_, svc, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg},
		grpc.ChainUnaryInterceptor(
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				switch info.FullMethod {
				case pb.Peer_Heartbeats_FullMethodName, pb.Peer_Batch_FullMethodName:
					calls.Add(1)
				case pb.Peer_Heartbeat_FullMethodName:
					single.Add(1)
				}
				return h(ctx, req)
			}))
	ms := namedHeartbeats(100)
	sendHeld(t, srv, tr, ms)
	seen := map[string]bool{}
	for range ms {
		in := srv.next(t)
		if in.Reply == nil {
			t.Fatalf("heartbeat of %s delivered without a reply channel", in.Msg.Election)
		}
		seen[in.Msg.Election] = true
	}
	if len(seen) != len(ms) {
		t.Fatalf("%d distinct elections' heartbeats arrived, want %d", len(seen), len(ms))
	}
	for range ms {
		if r := cli.next(t); r.Msg.Type != election.MsgHeartbeatResp {
			t.Fatalf("got %v, want a HeartbeatResp", r.Msg.Type)
		}
	}
	cli.noFailure(t)
	if c, s := calls.Load(), single.Load(); c+s > 3 || c == 0 {
		t.Errorf("100 heartbeats took %d Batch or Heartbeats calls and %d Heartbeat calls, want one or two in all", c, s)
	}
	if n := svc.Stats().Received[election.MsgHeartbeat]; n != 100 {
		t.Errorf("server received %d heartbeats, want 100", n)
	}
	eventually(t, "every heartbeat counted as sent", func() bool {
		return tr.Stats().Sent[election.MsgHeartbeat] == 100 && tr.Stats().Replies == 100
	})
}

// The default election's heartbeats keep their own calls, one each.
func TestGRPCDefaultHeartbeatsStayAlone(t *testing.T) {
	srv := newFakeReceiver(2)
	var calls atomic.Int64
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg}, countCalls(&calls, pb.Peer_Heartbeat_FullMethodName))
	ms := namedHeartbeats(10)
	for i := range ms {
		ms[i].Election = ""
	}
	sendHeld(t, srv, tr, ms)
	for range ms {
		srv.next(t)
		cli.next(t)
	}
	if n := calls.Load(); n != int64(len(ms)) {
		t.Errorf("%d default heartbeats took %d Heartbeat calls, want one each", len(ms), n)
	}
}

// A heartbeat the receiver refuses is reported failed on its own, with the
// error its own call would have had; the others are answered.
func TestGRPCHeartbeatsRefusalsPerHeartbeat(t *testing.T) {
	srv := newFakeReceiver(2)
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	srv.setErr(ErrOverloaded)
	ms := namedHeartbeats(50)
	for _, m := range ms {
		tr.Send(m)
	}
	for range ms {
		f := cli.nextFailure(t)
		if f.m.Type != election.MsgHeartbeat || !PeerOverloaded(f.err) {
			t.Fatalf("%v failed with %v, want the peer's overload", f.m.Type, f.err)
		}
	}
}

// A default-election Heartbeat in a Heartbeats call is refused: it has a
// call of its own.
func TestHeartbeatsRefusesTheDefaultElection(t *testing.T) {
	srv := newFakeReceiver(2)
	svc := NewPeerService(2, srv)
	hb := namedHeartbeats(2)
	hb[0].Election = ""
	var x pb.Heartbeats
	for _, m := range hb {
		enc, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		x.Heartbeats = append(x.Heartbeats, enc.(*pb.Heartbeat))
	}
	out, err := svc.Heartbeats(context.Background(), &x)
	if err != nil {
		t.Fatal(err)
	}
	if a := out.GetAnswers(); len(a) != 2 || a[0].GetCode() == 0 || a[1].GetCode() != 0 || a[1].GetReply() == nil {
		t.Fatalf("answers %v: want the first refused, the second answered", a)
	}
}

// A peer that serves neither Heartbeats nor Heartbeats in a Batch (a node
// from between Batch and Heartbeats) gets every heartbeat in a call of its
// own, and answers each: TestGRPCBatchedHeartbeatsFallBackToOwnCalls.
