package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
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
// in fewer calls than messages; the default election's messages and
// Heartbeats between them keep their own calls and their place.
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
	// The default election's messages have a queue of their own, and
	// Heartbeats calls of their own: each kind keeps its order.
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
