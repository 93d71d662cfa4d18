package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
)

func wantCode(t *testing.T, f failure, code codes.Code) {
	t.Helper()
	if got := status.Code(f.err); got != code {
		t.Fatalf("failure of %v: code %v (%v), want %v", f.m.Type, got, f.err, code)
	}
}

func TestGRPCEveryTypeThroughRealServer(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	_, svc, cliRecv, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: maxMsg})

	for _, m := range sampleMessages(1, 2) {
		tr.Send(m)
		in := srvRecv.next(t)
		if !reflect.DeepEqual(in.Msg, m) {
			t.Errorf("%v arrived as\n %+v\nwant %+v", m.Type, in.Msg, m)
		}
		if (in.Reply != nil) != (m.Type == election.MsgHeartbeat) {
			t.Errorf("%v: Reply set = %v", m.Type, in.Reply != nil)
		}
		if m.Type == election.MsgHeartbeat {
			// The reply comes back to the sending node.
			r := cliRecv.next(t)
			want := election.Message{Type: election.MsgHeartbeatResp, From: 2, To: 1, Term: m.Term, Leader: 2}
			if !reflect.DeepEqual(r.Msg, want) || r.Reply != nil {
				t.Errorf("heartbeat reply %+v, want %+v", r, want)
			}
		}
	}
	cliRecv.noFailure(t)

	// The server counts a message after it handed it over: wait for the
	// last one's count (read too early under load: received[TimeoutNow] 0).
	eventually(t, "server counts every message", func() bool {
		return svc.Stats().Received[election.MsgTimeoutNow] == 1
	})
	st := svc.Stats()
	for _, m := range sampleMessages(1, 2) {
		if st.Received[m.Type] != 1 {
			t.Errorf("server received[%v] = %d, want 1", m.Type, st.Received[m.Type])
		}
	}
	eventually(t, "client counts every send", func() bool {
		return tr.Stats().Sent[election.MsgTimeoutNow] == 1
	})
	cs := tr.Stats()
	for _, m := range sampleMessages(1, 2) {
		if cs.Sent[m.Type] != 1 {
			t.Errorf("client sent[%v] = %d, want 1", m.Type, cs.Sent[m.Type])
		}
	}
	if cs.Replies != 1 || len(cs.Failed) != 0 {
		t.Errorf("client stats %+v", cs)
	}
}

func TestGRPCKeepsPerPeerOrder(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	_, _, _, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: maxMsg})
	const n = 200
	for i := 1; i <= n; i++ {
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: election.Term(i)})
	}
	for i := 1; i <= n; i++ {
		if got := srvRecv.next(t).Msg.Term; got != election.Term(i) {
			t.Fatalf("message %d arrived with term %d", i, got)
		}
	}
}

func TestGRPCClosedPortFailsFast(t *testing.T) {
	cliRecv := newFakeReceiver(1)
	// The send deadline is far beyond the wait: a failure reported within
	// the wait, as Unavailable rather than DeadlineExceeded, comes from the
	// refused connection and not from waiting for the deadline.
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv, SendTimeout: time.Hour})
	tr.SetPeer(2, deadAddr(t))
	for i := 0; i < 3; i++ { // first dial, then in transient failure
		tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
		wantCode(t, cliRecv.nextFailure(t), codes.Unavailable)
	}
	if got := tr.Stats().Failed[election.MsgHeartbeat]; got != 3 {
		t.Errorf("failed[Heartbeat] = %d, want 3", got)
	}
}

func TestGRPCReceiverRefusals(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	_, svc, cliRecv, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: maxMsg})
	m := election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: 1, Leader: 1}

	srvRecv.setErr(ErrNotServing)
	tr.Send(m)
	f := cliRecv.nextFailure(t)
	wantCode(t, f, codes.Unavailable)
	if !reflect.DeepEqual(f.m, m) {
		t.Errorf("failed message %+v, want %+v", f.m, m)
	}

	srvRecv.setErr(ErrOverloaded)
	tr.Send(m)
	wantCode(t, cliRecv.nextFailure(t), codes.ResourceExhausted)

	srvRecv.setErr(ErrNotReady)
	tr.Send(m)
	wantCode(t, cliRecv.nextFailure(t), codes.FailedPrecondition)

	srvRecv.setErr(errors.New("boom"))
	tr.Send(m)
	wantCode(t, cliRecv.nextFailure(t), codes.Internal)

	srvRecv.setErr(nil)
	tr.Send(m)
	srvRecv.next(t)

	// The service counts a delivery after Receive returns, and the fake
	// receiver hands the message over inside it: wait for the count.
	eventually(t, "the delivery counted", func() bool { return svc.Stats().Received[election.MsgCoordinator] == 1 })
	st := svc.Stats()
	if st.RejectedNotServing != 1 || st.RejectedOverloaded != 1 || st.RejectedOther != 1 || st.RejectedNotReady != 1 || st.Received[election.MsgCoordinator] != 1 {
		t.Errorf("server stats %+v", st)
	}
	if got := tr.Stats().Failed[election.MsgCoordinator]; got != 4 {
		t.Errorf("client failed[Coordinator] = %d, want 4", got)
	}
}

func TestGRPCMalformedRejected(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	addr, svc, cliRecv, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: maxMsg})
	tr.SetPeer(9, addr) // node 2 listens where 9 is believed to be
	var logs strings.Builder
	var logMu sync.Mutex
	svc.SetLogger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)))

	bad := []election.Message{
		{Type: election.MsgAnswer, From: 0, To: 2, Term: 1},
		{Type: election.MsgAnswer, From: 1, To: 9, Term: 1},
		{Type: election.MsgTimeoutNow, From: 1, To: 2},
		{Type: election.MsgCoordinator, From: 1, To: 2, Term: 1},
		{Type: election.MsgElection, From: 1, To: 2, Term: 1, Candidates: []election.Rank{{ID: 0}}},
	}
	for _, m := range bad {
		tr.Send(m)
		f := cliRecv.nextFailure(t)
		wantCode(t, f, codes.InvalidArgument)
		t.Logf("%v: %v", m.Type, f.err)
	}
	if got := svc.Stats().RejectedInvalid; got != uint64(len(bad)) {
		t.Errorf("rejected invalid = %d, want %d", got, len(bad))
	}
	// Logged with the reason, once a second at most: the burst is one line.
	logMu.Lock()
	if got := strings.Count(logs.String(), "refused a message"); got != 1 || !strings.Contains(logs.String(), "invalid message") {
		t.Errorf("want one WARN line naming the reason for the burst, got %d:\n%s", got, logs.String())
	}
	logMu.Unlock()
	// Still serving.
	good := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1}
	tr.Send(good)
	if got := srvRecv.next(t).Msg; !reflect.DeepEqual(got, good) {
		t.Errorf("got %+v", got)
	}
	select {
	case in := <-srvRecv.got:
		t.Errorf("an invalid message reached the node: %+v", in.Msg)
	default:
	}
}

// bigElection is a ring Election of MaxCandidates ranks with the widest
// varints: about 1.5 MiB on the wire, yet valid.
func bigElection(from, to election.NodeID) election.Message {
	c := make([]election.Rank, MaxCandidates)
	for i := range c {
		c[i] = election.Rank{Priority: -1 - int64(i), ID: election.NodeID(1<<63 | uint64(i))}
	}
	return election.Message{Type: election.MsgElection, From: from, To: to, Term: 1, Initiator: from, Candidates: c}
}

func TestGRPCOversizedRefused(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	addr, svc := startServer(t, 2, srvRecv)
	big := bigElection(1, 2)

	t.Run("by the server", func(t *testing.T) {
		cliRecv := newFakeReceiver(1)
		// A 1.5 MiB message under -race on a busy machine can take longer
		// than the default 500ms deadline; this test is about size.
		tr := newGRPC(t, GRPCConfig{Self: 1, Receiver: cliRecv, MaxMessageBytes: 8 << 20, SendTimeout: 20 * time.Second})
		tr.SetPeer(2, addr)
		tr.Send(big)
		f := cliRecv.nextFailure(t)
		wantCode(t, f, codes.ResourceExhausted)
		t.Logf("%v", f.err)
		if got := tr.Stats().Failed[election.MsgElection]; got != 1 {
			t.Errorf("failed[Election] = %d, want 1", got)
		}
		small := election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 1, Initiator: 1,
			Candidates: []election.Rank{{Priority: 1, ID: 1}}}
		tr.Send(small)
		if got := srvRecv.next(t).Msg; !reflect.DeepEqual(got, small) {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("by the sender's limit", func(t *testing.T) {
		cliRecv := newFakeReceiver(1)
		tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv, SendTimeout: 20 * time.Second})
		tr.SetPeer(2, addr)
		tr.Send(big)
		wantCode(t, cliRecv.nextFailure(t), codes.ResourceExhausted)
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
		srvRecv.next(t)
	})
	if got := svc.Stats().Received[election.MsgElection]; got != 1 {
		t.Errorf("server received[Election] = %d, want 1", got)
	}
}

func TestGRPCServerSizeLimitConfigurable(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	_, _, cliRecv, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: 4 << 20}, grpc.MaxRecvMsgSize(4<<20))
	tr.Send(bigElection(1, 2))
	select {
	case in := <-srvRecv.got:
		if got := len(in.Msg.Candidates); got != MaxCandidates {
			t.Errorf("%d candidates arrived", got)
		}
	case f := <-cliRecv.failed:
		t.Fatalf("the big message failed: %v", f.err)
	case <-time.After(waitFor):
		t.Fatalf("the big message had no outcome within %v", waitFor)
	}
}

func TestGRPCHeartbeatUnanswered(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	srvRecv.autoReply = false
	_, svc, cliRecv, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: maxMsg, SendTimeout: 100 * time.Millisecond})
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	in := srvRecv.next(t)
	wantCode(t, cliRecv.nextFailure(t), codes.DeadlineExceeded)
	eventually(t, "server counts the unanswered heartbeat", func() bool {
		return svc.Stats().HeartbeatsUnanswered == 1
	})
	// A late answer does not block the node.
	in.Reply <- election.Message{Type: election.MsgHeartbeatResp, From: 2, To: 1, Term: 1}
}

func TestGRPCHeartbeatReplyClosed(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	srvRecv.autoReply = false
	_, _, cliRecv, tr := pairGRPC(t, srvRecv, GRPCConfig{MaxMessageBytes: maxMsg})
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	close(srvRecv.next(t).Reply)
	wantCode(t, cliRecv.nextFailure(t), codes.Aborted)
}

func TestPeerServiceHeartbeatDeadline(t *testing.T) {
	r := newFakeReceiver(2)
	r.autoReply = false
	svc := NewPeerService(2, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := svc.Heartbeat(ctx, &pb.Heartbeat{From: 1, To: 2, Term: 1, Leader: 2})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
	// Served directly, without a grpc.Server.
	if _, err := svc.Notify(context.Background(), &pb.HeartbeatReply{From: 1, To: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Answer(context.Background(), &pb.Answer{From: 1, To: 3, Term: 1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v", err)
	}
}

func TestGRPCUnknownPeerQueueFullRemove(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	block := make(chan struct{})
	srvRecv.block, srvRecv.entered = block, make(chan struct{}, 16)
	addr, _ := startServer(t, 2, srvRecv)
	defer close(block)
	cliRecv := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv, QueueLen: 1, SendTimeout: 5 * time.Second})
	m := func(term election.Term) election.Message {
		return election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: term}
	}

	tr.Send(m(1))
	if f := cliRecv.nextFailure(t); !errors.Is(f.err, ErrUnknownPeer) || f.m.Term != 1 {
		t.Fatalf("unknown peer: %+v %v", f.m, f.err)
	}

	tr.SetPeer(2, addr)
	tr.Send(m(1)) // in flight, held by the server
	select {
	case <-srvRecv.entered:
	case <-time.After(waitFor):
		t.Fatal("message 1 never reached the server")
	}
	tr.Send(m(2)) // queued
	tr.Send(m(3)) // queue full
	if f := cliRecv.nextFailure(t); !errors.Is(f.err, ErrQueueFull) || f.m.Term != 3 {
		t.Fatalf("queue full: %+v %v", f.m, f.err)
	}

	// Forget the peer: the RPC in flight is canceled and the queued
	// message reported; later sends fail at once.
	tr.RemovePeer(2)
	got := map[election.Term]error{}
	for len(got) < 2 {
		f := cliRecv.nextFailure(t)
		got[f.m.Term] = f.err
	}
	if code := status.Code(got[1]); code != codes.Canceled {
		t.Errorf("in flight: %v", got[1])
	}
	if !errors.Is(got[2], ErrUnknownPeer) {
		t.Errorf("queued: %v", got[2])
	}
	tr.Send(m(4))
	if f := cliRecv.nextFailure(t); !errors.Is(f.err, ErrUnknownPeer) || f.m.Term != 4 {
		t.Fatalf("after RemovePeer: %+v %v", f.m, f.err)
	}
	if got := tr.Stats().Failed[election.MsgAnswer]; got != 5 {
		t.Errorf("failed[Answer] = %d, want 5", got)
	}
}

func TestGRPCAddressChange(t *testing.T) {
	cliRecv := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv})
	tr.SetPeer(2, deadAddr(t))
	m := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1}
	tr.Send(m)
	wantCode(t, cliRecv.nextFailure(t), codes.Unavailable)

	srvRecv := newFakeReceiver(2)
	addr, _ := startServer(t, 2, srvRecv)
	tr.SetPeer(2, addr)
	tr.Send(m)
	srvRecv.next(t)
	tr.SetPeer(2, addr) // same address: nothing changes
	tr.Send(m)
	srvRecv.next(t)
	cliRecv.noFailure(t)
}

func TestGRPCTwoNodes(t *testing.T) {
	// Each node serves and sends; a heartbeat answered by the real
	// PeerService reaches the follower's Receiver, and the leader's
	// MsgHeartbeatResp sent on its own goes out as Notify.
	r1, r2 := newFakeReceiver(1), newFakeReceiver(2)
	a1, _ := startServer(t, 1, r1)
	a2, _ := startServer(t, 2, r2)
	t1 := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: r1})
	t2 := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 2, Receiver: r2})
	t1.SetPeer(2, a2)
	t2.SetPeer(1, a1)
	t1.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 7, Leader: 2})
	r2.next(t)
	if got := r1.next(t).Msg; got.Type != election.MsgHeartbeatResp || got.From != 2 || got.Term != 7 {
		t.Fatalf("reply %+v", got)
	}
	t2.Send(election.Message{Type: election.MsgHeartbeatResp, From: 2, To: 1, Term: 9, Leader: 2, Reject: true})
	if got := r1.next(t); got.Msg.Type != election.MsgHeartbeatResp || !got.Msg.Reject || got.Reply != nil {
		t.Fatalf("notify %+v", got)
	}
}

func TestGRPCInvalidReplyDropped(t *testing.T) {
	// A server that answers a heartbeat with a reply addressed elsewhere.
	lisAddr, stop := startRawServer(t, &badReplyServer{})
	defer stop()
	cliRecv := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv})
	tr.SetPeer(2, lisAddr)
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	eventually(t, "invalid reply dropped", func() bool { return tr.Stats().RepliesDropped == 1 })
	select {
	case in := <-cliRecv.got:
		t.Fatalf("invalid reply delivered: %+v", in.Msg)
	default:
	}
}

type badReplyServer struct{ pb.UnimplementedPeerServer }

func (badReplyServer) Heartbeat(context.Context, *pb.Heartbeat) (*pb.HeartbeatReply, error) {
	return &pb.HeartbeatReply{From: 2, To: 5, Term: 1}, nil
}

func startRawServer(t *testing.T, s pb.PeerServer) (string, func()) {
	t.Helper()
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterPeerServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return lis.Addr().String(), func() { srv.Stop(); <-done }
}

func TestGRPCCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		srvRecv := newFakeReceiver(2)
		addr, stop := serveStoppable(t, 2, srvRecv)
		defer stop()

		cliRecv := newFakeReceiver(1)
		tr, err := NewGRPC(GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv, SendTimeout: waitFor})
		if err != nil {
			t.Fatal(err)
		}
		tr.SetPeer(2, addr)
		tr.SetPeer(3, deadAddr(t))
		tr.SetPeer(4, addr)
		tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 3, Term: 1})
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 8, Term: 1})
		srvRecv.next(t)
		cliRecv.next(t)
		cliRecv.nextFailure(t)
		tr.Close()
		tr.Close()
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
		tr.SetPeer(5, addr)
	}()
	waitGoroutines(t, before)
}

func TestGRPCDialOptionsAndTargets(t *testing.T) {
	srvRecv := newFakeReceiver(2)
	addr, _ := startServer(t, 2, srvRecv)
	cliRecv := newFakeReceiver(1)
	// An explicit scheme is used as is; extra dial options are applied.
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	tr.SetPeer(2, "passthrough:///"+addr)
	tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	srvRecv.next(t)
	if _, err := NewGRPC(GRPCConfig{MaxMessageBytes: maxMsg, Receiver: cliRecv}); err == nil {
		t.Error("NewGRPC accepted Self 0")
	}
	if _, err := NewGRPC(GRPCConfig{MaxMessageBytes: maxMsg, Self: 1}); err == nil {
		t.Error("NewGRPC accepted a nil Receiver")
	}
	// The transport takes max-message-bytes as configured: no default of its own.
	if _, err := NewGRPC(GRPCConfig{Self: 1, Receiver: newFakeReceiver(1)}); err == nil || !strings.Contains(err.Error(), "MaxMessageBytes") {
		t.Errorf("NewGRPC without MaxMessageBytes: %v, want an error naming the field", err)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestGRPCRestartedPeerIsReachedAtOnce: a peer's process dies and its
// channel backs off from refused dials; the process comes back on the same
// port. The next message reaches it at once, instead of failing on the
// error the channel kept (which lost a ring round, 700 ms, in crash
// failover between network namespaces).
func TestGRPCRestartedPeerIsReachedAtOnce(t *testing.T) {
	cliRecv := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cliRecv, ReconnectBackoff: time.Hour})
	srv := newFakeReceiver(2)
	addr, stop := serveStoppable(t, 2, srv)
	tr.SetPeer(2, addr)
	m := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1}
	tr.Send(m)
	srv.next(t)
	for deadline := time.Now().Add(waitFor); tr.Stats().Sent[election.MsgAnswer] == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // the call's answer, not just its delivery
			t.Fatal("the first message's call never completed")
		}
	}

	answerFailed := func() {
		t.Helper()
		for { // skip the dropped connection's synthetic heartbeat report (ErrPeerDown)
			if f := cliRecv.nextFailure(t); f.m.Type == election.MsgAnswer {
				wantCode(t, f, codes.Unavailable)
				return
			}
		}
	}
	stop() // the process dies: the channel's dials are refused and it backs off (for an hour)
	tr.Send(m)
	answerFailed()
	tr.Send(m)
	answerFailed()

	// Back on the same port.
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv2 := newFakeReceiver(2)
	s2 := NewGRPCServer(NewPeerService(2, srv2), maxMsg)
	done := make(chan struct{})
	go func() { defer close(done); _ = s2.Serve(lis) }()
	t.Cleanup(func() { s2.Stop(); <-done })
	tr.Send(m)
	if got := srv2.next(t).Msg; !reflect.DeepEqual(got, m) {
		t.Fatalf("got %+v", got)
	}
	for {
		select {
		case f := <-cliRecv.failed:
			if f.m.Type == election.MsgAnswer {
				t.Fatalf("the message to the restarted peer was also reported failed: %v (%+v)", f.err, f.m)
			}
			continue
		default:
		}
		break
	}
}
