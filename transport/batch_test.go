package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
)

// namedBurst is n one-way messages of named elections from 1 to 2, of
// every batchable type in turn.
func namedBurst(n int) []election.Message {
	term := election.NextTerm(0, 1)
	var ms []election.Message
	for i := range n {
		name := fmt.Sprintf("jobs-%03d", i)
		kinds := []election.Message{
			{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: name},
			{Type: election.MsgCandidacy, From: 1, To: 2, Term: term, Election: name, Confirmed: true,
				FromRank: election.Rank{Priority: 3, ID: 1}, Value: "app-1"},
			{Type: election.MsgElection, From: 1, To: 2, Term: term, Initiator: 1, Election: name,
				FromRank: election.Rank{ID: 1}, InitiatorRank: election.Rank{ID: 1}},
			{Type: election.MsgAnswer, From: 1, To: 2, Term: term, Election: name},
			{Type: election.MsgHeartbeatResp, From: 1, To: 2, Term: term, Leader: 4, Election: name},
			{Type: election.MsgTimeoutNow, From: 1, To: 2, Term: term, Election: name},
		}
		ms = append(ms, kinds[i%len(kinds)])
	}
	return ms
}

// A burst of named messages queued for one peer arrives whole and in order,
// in fewer calls than messages, a named Heartbeat among them after the
// rest; the default election's messages keep their own calls and order.
func TestGRPCBatchesNamedMessagesInOrder(t *testing.T) {
	srv := newFakeReceiver(2)
	var calls atomic.Int64
	count := grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		return h(ctx, req)
	})
	_, svc, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg}, count)
	ms := namedBurst(200) // below the send queue's length
	term := election.NextTerm(0, 1)
	ms = slices.Insert(ms, 100,
		election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: term},
		election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: term, Leader: 2, Election: "jobs-x"})
	for _, m := range ms {
		tr.Send(m)
	}
	// The default election's messages have a queue of their own: each
	// kind keeps its order.
	var got []election.Message
	for range ms {
		select {
		case f := <-cli.failed:
			t.Fatalf("message %+v failed: %v", f.m, f.err)
		default:
		}
		got = append(got, srv.next(t).Msg)
	}
	for _, kind := range []func(election.Message) bool{
		func(m election.Message) bool { return m.Election == "" },
		func(m election.Message) bool { return m.Election != "" && m.Type == election.MsgHeartbeat },
		func(m election.Message) bool { return m.Election != "" && m.Type != election.MsgHeartbeat },
	} {
		want := slices.DeleteFunc(slices.Clone(ms), func(m election.Message) bool { return !kind(m) })
		have := slices.DeleteFunc(slices.Clone(got), func(m election.Message) bool { return !kind(m) })
		if !reflect.DeepEqual(have, want) {
			t.Fatalf("arrived\n %+v\nwant %+v", have, want)
		}
	}
	cli.next(t) // the Heartbeat's answer
	cli.noFailure(t)
	eventually(t, "every message counted as sent", func() bool {
		sent := uint64(0)
		for _, n := range tr.Stats().Sent {
			sent += n
		}
		return sent == uint64(len(ms))
	})
	if n := calls.Load(); n > 20 {
		t.Errorf("%d messages took %d calls", len(ms), n)
	}
	if n := svc.Stats().Received[election.MsgCandidacy]; n != 34 {
		t.Errorf("server received %d Candidacy, want 34", n)
	}
}

// A batch is cut to the size limit: each call stays under it.
func TestGRPCBatchStaysUnderTheSizeLimit(t *testing.T) {
	srv := newFakeReceiver(2)
	const limit = 4 << 10
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: limit}, grpc.MaxRecvMsgSize(limit))
	var ms []election.Message
	for i := range 40 {
		ms = append(ms, election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Election: fmt.Sprintf("e%d", i),
			Confirmed: true, FromRank: election.Rank{ID: 1}, Value: string(make([]byte, 900))})
	}
	for _, m := range ms {
		tr.Send(m)
	}
	for i := range ms {
		if got := srv.next(t).Msg.Election; got != ms[i].Election {
			t.Fatalf("message %d is %s, want %s", i, got, ms[i].Election)
		}
	}
	cli.noFailure(t)
}

// The messages of a batch the receiver refuses are reported failed one by
// one, with the error their own call would have had.
func TestGRPCBatchRefusalsReportedPerMessage(t *testing.T) {
	srv := newFakeReceiver(2)
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	srv.setErr(ErrNotServing)
	ms := namedBurst(60)
	for _, m := range ms {
		tr.Send(m)
	}
	for range ms {
		f := cli.nextFailure(t)
		if status.Code(f.err) != codes.Unavailable || !strings.Contains(f.err.Error(), ErrNotServing.Error()) {
			t.Fatalf("%v failed with %v, want the peer's refusal (not serving)", f.m.Type, f.err)
		}
	}
}

// Named messages the receiver refuses as overloaded (its inbox was full)
// are not failed: they are sent again after a pause, and delivered once it
// takes them. An Election is reported, as the busy peer's answer.
func TestGRPCBatchOverloadedNamedMessagesAreSentAgain(t *testing.T) {
	srv := newFakeReceiver(2)
	_, svc, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	srv.setErr(ErrOverloaded)
	ms := namedBurst(60)
	for _, m := range ms {
		tr.Send(m)
	}
	eventually(t, "the receiver refused messages as overloaded", func() bool { return svc.Stats().RejectedOverloaded >= 60 })
	srv.setErr(nil)
	key := func(m election.Message) string { return fmt.Sprintf("%v %s", m.Type, m.Election) }
	want := map[string]bool{}
	elections := 0
	for _, m := range ms {
		if m.Type == election.MsgElection {
			elections++
		} else {
			want[key(m)] = true
		}
	}
	for len(want) > 0 {
		delete(want, key(srv.next(t).Msg))
	}
	for range elections {
		if f := cli.nextFailure(t); f.m.Type != election.MsgElection || !PeerOverloaded(f.err) {
			t.Fatalf("%v failed with %v, want only Elections, with the peer's overload", f.m.Type, f.err)
		}
	}
	cli.noFailure(t)
}

// oldPeer is a peer service from before Batch.
type oldPeer struct{ *PeerService }

func (oldPeer) Batch(context.Context, *pb.Batch) (*pb.BatchAck, error) {
	return nil, errors.New("unreachable")
}

// A peer that does not serve Batch (an older node) gets every message, one
// call each.
func TestGRPCBatchFallsBackForAnOlderPeer(t *testing.T) {
	srv := newFakeReceiver(2)
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	desc := pb.Peer_ServiceDesc
	var methods []grpc.MethodDesc
	for _, m := range desc.Methods {
		if m.MethodName != "Batch" {
			methods = append(methods, m)
		}
	}
	desc.Methods = methods
	s.RegisterService(&desc, oldPeer{NewPeerService(2, srv)})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{Self: 1, Receiver: cli, MaxMessageBytes: maxMsg})
	tr.SetPeer(2, lis.Addr().String())
	ms := namedBurst(100)
	for _, m := range ms {
		tr.Send(m)
	}
	for i, want := range ms {
		if in := srv.next(t); !reflect.DeepEqual(in.Msg, want) {
			t.Fatalf("message %d arrived as %+v, want %+v", i, in.Msg, want)
		}
	}
	cli.noFailure(t)
}

// A peer that refuses everything as overloaded is sent its named messages
// again at pauses that grow, and after busyGiveUp they are lost (counted),
// not sent again: the refusals stop, far below a call every 5 ms.
func TestGRPCWedgedPeerIsNotHammered(t *testing.T) {
	srv := newFakeReceiver(2)
	_, svc, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	srv.setErr(ErrOverloaded)
	for i := range 10 {
		tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: election.NextTerm(0, 1), Election: fmt.Sprintf("e%d", i)})
	}
	start := time.Now()
	last := uint64(0)
	for {
		time.Sleep(300 * time.Millisecond) // the quiet that shows the retries stopped
		n := svc.Stats().RejectedOverloaded
		if n > 0 && n == last {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("still refusing after 10 s: %d refusals", n)
		}
		last = n
	}
	if calls := last / 10; calls > 40 {
		t.Fatalf("%d calls refused before the messages were given up, want the pauses to grow (about 17)", calls)
	}
	if d := time.Since(start); d < busyGiveUp {
		t.Fatalf("the refusals stopped after %v, before busyGiveUp", d)
	}
	cli.noFailure(t)
}

// A lone named message a peer refuses as overloaded is sent again after a
// pause, as one of many is, and not reported failed: in its own call it
// was, so whether a busy peer's refusal failed a message depended on how
// many waited together.
func TestGRPCLoneNamedMessageRefusedIsSentAgain(t *testing.T) {
	srv := newFakeReceiver(2)
	_, svc, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	srv.setErr(ErrOverloaded)
	tr.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: election.NextTerm(0, 1), Election: "e0"})
	deadline := time.Now().Add(10 * time.Second)
	for svc.Stats().RejectedOverloaded < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("refused %d times in 10 s, want it sent again", svc.Stats().RejectedOverloaded)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cli.noFailure(t)
}

// batchSpy serves Batch as the current node does and records, per call,
// the types it carried in order.
type batchSpy struct {
	*PeerService
	mu    sync.Mutex
	calls [][]election.MsgType
}

func (p *batchSpy) Batch(ctx context.Context, x *pb.Batch) (*pb.BatchAck, error) {
	var types []election.MsgType
	for _, e := range x.GetMessages() {
		if _, ok := e.GetMessage().(*pb.Envelope_Heartbeat); ok {
			types = append(types, election.MsgHeartbeat)
		} else {
			types = append(types, election.MsgCandidacy) // any one-way message
		}
	}
	p.mu.Lock()
	p.calls = append(p.calls, types)
	p.mu.Unlock()
	return p.PeerService.Batch(ctx, x)
}

// servePeer serves svc, with Peer's methods but those named in without, on
// a loopback port, and returns a transport of node 1 that knows it as 2.
func servePeer(t *testing.T, svc pb.PeerServer, without ...string) (*fakeReceiver, *GRPC) {
	t.Helper()
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	desc := pb.Peer_ServiceDesc
	desc.Methods = slices.DeleteFunc(slices.Clone(desc.Methods), func(m grpc.MethodDesc) bool { return slices.Contains(without, m.MethodName) })
	s.RegisterService(&desc, svc)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{Self: 1, Receiver: cli, MaxMessageBytes: maxMsg})
	tr.SetPeer(2, lis.Addr().String())
	return cli, tr
}

// heldBehind is ms behind a default-election message, which sendHeld holds
// at the receiver while ms gather in the named set.
func heldBehind(ms []election.Message) []election.Message {
	first := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: election.NextTerm(0, 1)}
	return append([]election.Message{first}, ms...)
}

// answersInOrder takes n answers from cli and checks they answer hbs, in
// order.
func answersInOrder(t *testing.T, cli *fakeReceiver, hbs []election.Message) {
	t.Helper()
	for i, hb := range hbs {
		r := cli.next(t)
		if r.Msg.Type != election.MsgHeartbeatResp || r.Msg.Election != hb.Election {
			t.Fatalf("answer %d: %v of %q, want the HeartbeatResp of %q", i, r.Msg.Type, r.Msg.Election, hb.Election)
		}
	}
}

// A node pair's period in one call: the pair beat (a Candidacy of no
// election), a Coordinator and the quiet followers' Heartbeats queued
// together leave in one Batch, the Heartbeats last, and each Heartbeat's
// answer comes back in order; no Heartbeats call is made.
func TestGRPCBatchCarriesHeartbeatsWithThePairBeat(t *testing.T) {
	srv := newFakeReceiver(2)
	spy := &batchSpy{PeerService: NewPeerService(2, srv)}
	cli, tr := servePeer(t, spy)
	term := election.NextTerm(0, 1)
	beat := election.Message{Type: election.MsgCandidacy, From: 1, To: 2, FromRank: election.Rank{ID: 1}, Incarnation: 7}
	coord := election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "jobs-x"}
	hbs := namedHeartbeats(43)
	queued := append([]election.Message{beat}, hbs[:20]...)
	queued = append(append(queued, coord), hbs[20:]...)
	ms := heldBehind(queued)
	sendHeld(t, srv, tr, ms)
	want := append([]election.Message{ms[0], beat, coord}, hbs...)
	for i, w := range want {
		if in := srv.next(t); !reflect.DeepEqual(in.Msg, w) {
			t.Fatalf("message %d arrived as %+v, want %+v", i, in.Msg, w)
		} else if (in.Reply != nil) != (w.Type == election.MsgHeartbeat) {
			t.Fatalf("message %d (%v) arrived with reply channel %v", i, w.Type, in.Reply != nil)
		}
	}
	answersInOrder(t, cli, hbs)
	cli.noFailure(t)
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.calls) != 1 || len(spy.calls[0]) != 45 {
		t.Fatalf("the period took Batch calls %v, want one of 45 messages", spy.calls)
	}
	if st := tr.Stats(); st.Sent[election.MsgHeartbeat] != 43 || st.Replies != 43 {
		t.Errorf("sent %d heartbeats with %d replies, want 43 and 43", st.Sent[election.MsgHeartbeat], st.Replies)
	}
}

// In a pass larger than a call, the Heartbeats ride only in the calls at
// its end: a call that carries one waits for the peer's loop to answer it,
// and the one-way messages before them (a failover's) are not held so.
func TestGRPCBatchPutsHeartbeatsLast(t *testing.T) {
	srv := newFakeReceiver(2)
	spy := &batchSpy{PeerService: NewPeerService(2, srv)}
	cli, tr := servePeer(t, spy)
	burst, hbs := namedBurst(700), namedHeartbeats(30)
	var queued []election.Message
	for i, m := range burst {
		queued = append(queued, m)
		if i%20 == 0 && i/20 < len(hbs) {
			queued = append(queued, hbs[i/20])
		}
	}
	ms := heldBehind(queued)
	sendHeld(t, srv, tr, ms)
	for range ms {
		srv.next(t)
	}
	answersInOrder(t, cli, hbs)
	spy.mu.Lock()
	defer spy.mu.Unlock()
	seen := 0
	for i, call := range spy.calls {
		for j, typ := range call {
			if typ == election.MsgHeartbeat {
				seen++
			} else if seen > 0 {
				t.Fatalf("call %d carries a one-way message at %d after a Heartbeat: %v", i, j, spy.calls)
			}
		}
	}
	if seen != len(hbs) || len(spy.calls) != 2 {
		t.Fatalf("Batch calls %v: want 2 carrying all %d heartbeats", spy.calls, len(hbs))
	}
}

// A default-election Heartbeat in a Batch is refused in its answer (it has
// a call of its own); the named one beside it is answered, and the one-way
// message after them delivered.
func TestBatchRefusesTheDefaultElectionHeartbeat(t *testing.T) {
	srv := newFakeReceiver(2)
	svc := NewPeerService(2, srv)
	hb := namedHeartbeats(2)
	hb[0].Election = ""
	term := election.NextTerm(0, 1)
	ms := append(hb, election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "jobs-x"})
	var x pb.Batch
	for _, m := range ms {
		enc, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		e, err := envelope(enc)
		if err != nil {
			t.Fatal(err)
		}
		x.Messages = append(x.Messages, e)
	}
	ack, err := svc.Batch(context.Background(), &x)
	if err != nil {
		t.Fatal(err)
	}
	if a := ack.GetHeartbeats(); len(a) != 2 || a[0].GetCode() != uint32(codes.InvalidArgument) || a[1].GetCode() != 0 || a[1].GetReply() == nil {
		t.Fatalf("heartbeat answers %v: want the first refused as invalid, the second answered", a)
	}
	if r := ack.GetRefused(); len(r) != 0 {
		t.Fatalf("refused %v: a heartbeat's refusal belongs in its answer, and the Coordinator was delivered", r)
	}
	if n := svc.Stats().Received[election.MsgCoordinator]; n != 1 {
		t.Fatalf("server received %d Coordinators, want 1", n)
	}
}

// olderBatchPeer serves Batch as a node from before Heartbeats in a Batch:
// the envelope's field it does not know arrives empty (proto keeps it as
// an unknown field), so it refuses the Heartbeat as an empty envelope and
// answers none. batched counts the Batch calls that carried one.
type olderBatchPeer struct {
	*PeerService
	batched atomic.Int64
}

func (p *olderBatchPeer) Batch(ctx context.Context, x *pb.Batch) (*pb.BatchAck, error) {
	y, carried := &pb.Batch{}, false
	for _, e := range x.GetMessages() {
		if _, ok := e.GetMessage().(*pb.Envelope_Heartbeat); ok {
			e, carried = &pb.Envelope{}, true
		}
		y.Messages = append(y.Messages, e)
	}
	if carried {
		p.batched.Add(1)
	}
	ack, err := p.PeerService.Batch(ctx, y)
	if ack != nil {
		ack.Heartbeats = nil
	}
	return ack, err
}

// A peer that serves Batch but not Heartbeats in it (an older node) has
// each Heartbeat it refused sent again in a Heartbeats call, answered and
// not reported failed; the rest of the pass goes as to such a peer (its
// Heartbeats in Heartbeats calls), and so do the passes after it for
// batchRetry.
func TestGRPCBatchedHeartbeatsFallBackForAnOlderPeer(t *testing.T) {
	srv := newFakeReceiver(2)
	old := &olderBatchPeer{PeerService: NewPeerService(2, srv)}
	cli, tr := servePeer(t, old)
	term := election.NextTerm(0, 1)
	hbs := namedHeartbeats(600) // more than one call: the pass goes on after the refusal
	ms := heldBehind(append([]election.Message{{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "jobs-x"}}, hbs...))
	for round := range 2 {
		sendHeld(t, srv, tr, ms)
		got := map[election.MsgType]int{}
		for range ms {
			got[srv.next(t).Msg.Type]++
		}
		if got[election.MsgHeartbeat] != 600 || got[election.MsgCoordinator] != 1 {
			t.Fatalf("round %d: the peer took %v, want 600 Heartbeats and 1 Coordinator", round, got)
		}
		answersInOrder(t, cli, hbs)
		cli.noFailure(t)
	}
	if n := old.batched.Load(); n != 1 {
		t.Errorf("%d Batch calls carried Heartbeats to the older peer, want 1 (the first, refused)", n)
	}
	if n := tr.Stats().Sent[election.MsgHeartbeat]; n != 1200 {
		t.Errorf("%d heartbeats counted as sent, want 1200 (each once)", n)
	}
}

// A node from between Batch and Heartbeats in it that does not serve
// Heartbeats either: each Heartbeat it refused in a Batch is sent again in
// a call of its own, and answered.
func TestGRPCBatchedHeartbeatsFallBackToOwnCalls(t *testing.T) {
	srv := newFakeReceiver(2)
	old := &olderBatchPeer{PeerService: NewPeerService(2, srv)}
	cli, tr := servePeer(t, old, "Heartbeats")
	hbs := namedHeartbeats(40)
	ms := heldBehind(hbs)
	sendHeld(t, srv, tr, ms)
	for range ms {
		srv.next(t)
	}
	answersInOrder(t, cli, hbs)
	cli.noFailure(t)
	if n := old.batched.Load(); n != 1 {
		t.Errorf("%d Batch calls carried Heartbeats to the older peer, want 1", n)
	}
}

// A Batch whose Heartbeats the peer's node does not answer in time still
// comes back before the caller's deadline: its one-way messages count as
// delivered (a refusal among them would be sent again), the unanswered
// Heartbeats are lost on the way (counted, not reported, as a silent
// call's), and the call is not silent.
func TestGRPCBatchAnswersBeforeTheDeadline(t *testing.T) {
	srv := newFakeReceiver(2)
	srv.autoReply = false
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg, SendTimeout: 300 * time.Millisecond})
	l := tr.q.linkOf(2).(*grpcLink)
	term := election.NextTerm(0, 1)
	ms := append([]election.Message{{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "jobs-x"}}, namedHeartbeats(3)...)
	if silent := l.sendBatch(context.Background(), ms); silent {
		t.Fatal("the call was silent: the server waited for the answers to the caller's deadline")
	}
	st := tr.Stats()
	if st.Sent[election.MsgCoordinator] != 1 || st.Sent[election.MsgHeartbeat] != 0 || st.Failed[election.MsgHeartbeat] != 3 {
		t.Fatalf("sent %v, failed %v: want the Coordinator sent and the 3 heartbeats lost", st.Sent, st.Failed)
	}
	cli.noFailure(t)
}
