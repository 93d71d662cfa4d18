package transport

import (
	"errors"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/electord/electord/election"
)

// pairOn joins nodes 1 and 2 and makes each a peer of the other.
func pairOn(t *testing.T, n *Network) (*fakeReceiver, *Memory, *fakeReceiver, *Memory) {
	t.Helper()
	r1, r2 := newFakeReceiver(1), newFakeReceiver(2)
	t1, t2 := n.Join(1, r1), n.Join(2, r2)
	t.Cleanup(func() { t1.Close(); t2.Close() })
	t1.SetPeer(2, "mem-2")
	t2.SetPeer(1, "mem-1")
	return r1, t1, r2, t2
}

func TestMemoryDeliversEveryTypeInOrder(t *testing.T) {
	r1, t1, r2, _ := pairOn(t, NewNetwork())
	for _, m := range sampleMessages(1, 2) {
		t1.Send(m)
	}
	for _, m := range sampleMessages(1, 2) {
		in := r2.next(t)
		if !reflect.DeepEqual(in.Msg, m) {
			t.Errorf("got %+v\nwant %+v", in.Msg, m)
		}
		if (in.Reply != nil) != (m.Type == election.MsgHeartbeat) {
			t.Errorf("%v: Reply set = %v", m.Type, in.Reply != nil)
		}
	}
	// The heartbeat's reply reaches node 1's Receiver.
	r := r1.next(t)
	want := election.Message{Type: election.MsgHeartbeatResp, From: 2, To: 1, Term: election.NextTerm(0, 1), Leader: 2}
	if !reflect.DeepEqual(r.Msg, want) {
		t.Errorf("reply %+v, want %+v", r.Msg, want)
	}
	const n = 200 // below the queue length
	for i := 1; i <= n; i++ {
		t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: election.Term(i)})
	}
	for i := 1; i <= n; i++ {
		if got := r2.next(t).Msg.Term; got != election.Term(i) {
			t.Fatalf("message %d arrived with term %d", i, got)
		}
	}
	r1.noFailure(t)
}

func TestMemoryNoAliasing(t *testing.T) {
	_, t1, r2, _ := pairOn(t, NewNetwork())
	c := []election.Rank{{ID: 1}, {ID: 2}}
	t1.Send(election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 1, Initiator: 1, Candidates: c})
	got := r2.next(t).Msg.Candidates
	got[0].ID = 99
	if c[0].ID != 1 {
		t.Fatal("the receiver's candidate list aliases the sender's")
	}
}

func TestMemoryDownUp(t *testing.T) {
	n := NewNetwork()
	r1, t1, r2, _ := pairOn(t, n)
	// Every delay the network can impose is far beyond the wait: a failure
	// reported within it, as Unavailable, is the refusal of a down node.
	n.SetCutDelay(time.Hour)
	n.SetSendTimeout(time.Hour)
	m := election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: 1, Leader: 1}
	n.Down(2)
	t1.Send(m)
	f := r1.nextFailure(t)
	wantCode(t, f, codes.Unavailable)
	if !reflect.DeepEqual(f.m, m) {
		t.Errorf("failed %+v", f.m)
	}
	n.Up(2)
	t1.Send(m)
	r2.next(t)
	r1.noFailure(t)
}

func TestMemoryCutHeal(t *testing.T) {
	n := NewNetwork()
	n.SetCutDelay(30 * time.Millisecond)
	r1, t1, r2, t2 := pairOn(t, n)
	r3 := newFakeReceiver(3)
	t3 := n.Join(3, r3)
	defer t3.Close()
	t1.SetPeer(3, "mem-3")

	n.Cut(1, 2)
	start := time.Now()
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	t2.Send(election.Message{Type: election.MsgAnswer, From: 2, To: 1, Term: 1})
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 3, Term: 1}) // not cut
	r3.next(t)
	wantCode(t, r1.nextFailure(t), codes.DeadlineExceeded)
	wantCode(t, r2.nextFailure(t), codes.DeadlineExceeded)
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("cut failed after %v, before the cut delay", took)
	}
	// A message held up by a cut is canceled when its peer is removed.
	n.SetCutDelay(time.Hour)
	taken := make(chan struct{}, 1)
	n.SetHook(func(election.Message) bool { taken <- struct{}{}; return true })
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	select {
	case <-taken:
	case <-time.After(waitFor):
		t.Fatal("message never taken for delivery")
	}
	n.SetHook(nil)
	t1.RemovePeer(2)
	wantCode(t, r1.nextFailure(t), codes.Canceled)
	t1.SetPeer(2, "mem-2")

	n.Heal()
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 2})
	if got := r2.next(t).Msg.Term; got != 2 {
		t.Errorf("term %d", got)
	}
}

func TestMemoryHook(t *testing.T) {
	n := NewNetwork()
	r1, t1, r2, _ := pairOn(t, n)
	var seen atomic.Int64
	n.SetHook(func(m election.Message) bool {
		seen.Add(1)
		return m.Type != election.MsgAnswer
	})
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	t1.Send(election.Message{Type: election.MsgTimeoutNow, From: 1, To: 2, Term: 1})
	if got := r2.next(t).Msg.Type; got != election.MsgTimeoutNow {
		t.Errorf("got %v; the hook did not drop the Answer", got)
	}
	if seen.Load() != 2 {
		t.Errorf("hook saw %d messages", seen.Load())
	}
	r1.noFailure(t)
	n.SetHook(nil)
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	r2.next(t)
}

func TestMemoryRefusals(t *testing.T) {
	n := NewNetwork()
	n.SetSendTimeout(50 * time.Millisecond)
	r1, t1, r2, _ := pairOn(t, n)

	t1.Send(election.Message{Type: election.MsgAnswer, From: 0, To: 2, Term: 1})
	wantCode(t, r1.nextFailure(t), codes.InvalidArgument)

	r2.setErr(ErrNotServing)
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	wantCode(t, r1.nextFailure(t), codes.Unavailable)
	r2.setErr(ErrOverloaded)
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	wantCode(t, r1.nextFailure(t), codes.ResourceExhausted)
	r2.setErr(nil)

	r2.autoReply = false // safe: no Receive in flight
	t1.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	r2.next(t)
	wantCode(t, r1.nextFailure(t), codes.DeadlineExceeded)

	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 7, Term: 1})
	if f := r1.nextFailure(t); !errors.Is(f.err, ErrUnknownPeer) {
		t.Errorf("unknown peer: %v", f.err)
	}
	t1.SetPeer(7, "nowhere")
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 7, Term: 1})
	wantCode(t, r1.nextFailure(t), codes.Unavailable)
}

func TestMemoryCloseDetaches(t *testing.T) {
	before := runtime.NumGoroutine()
	n := NewNetwork()
	n.SetCutDelay(time.Hour)
	r1, r2 := newFakeReceiver(1), newFakeReceiver(2)
	t1, t2 := n.Join(1, r1), n.Join(2, r2)
	t1.SetPeer(2, "")
	t1.SetPeer(3, "")
	t2.SetPeer(1, "")
	n.Cut(1, 3)
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 3, Term: 1}) // waits an hour
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	r2.next(t)
	t2.Close()
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	wantCode(t, r1.nextFailure(t), codes.Unavailable)
	t1.Close()
	t1.Close()
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	waitGoroutines(t, before)
	r1.noFailure(t)
}

// A crashed node's peers are told at once with ErrPeerDown, its sends are
// dropped, and sends to it fail with ErrPeerDown; Up undoes it.
func TestMemoryCrash(t *testing.T) {
	n := NewNetwork()
	r1, t1, r2, t2 := pairOn(t, n)
	n.Crash(2)
	if f := r1.nextFailure(t); f.m.To != 2 || !errors.Is(f.err, ErrPeerDown) {
		t.Fatalf("node 1 was told %+v (%v), want a failed Heartbeat to 2 with ErrPeerDown", f.m, f.err)
	}
	t2.Send(election.Message{Type: election.MsgAnswer, From: 2, To: 1, Term: 1})
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 1})
	if f := r1.nextFailure(t); f.m.To != 2 || !errors.Is(f.err, ErrPeerDown) {
		t.Fatalf("a send to the crashed node failed with %+v (%v), want ErrPeerDown", f.m, f.err)
	}
	select {
	case in := <-r1.got:
		t.Fatalf("the crashed node's send was delivered: %+v", in.Msg)
	case <-time.After(50 * time.Millisecond):
	}
	n.Up(2)
	t1.Send(election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 2})
	if in := r2.next(t); in.Msg.Term != 2 {
		t.Fatalf("after Up, node 2 got %+v", in.Msg)
	}
}
