package transport

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// A peer that takes its messages slowly holds its named elections'
// messages back; it does not fail them. Thousands of elections' messages
// queued for a peer whose call is still under way (far more than the send
// queue's DefaultQueueLen) all arrive once it answers, none reported failed
// (which an election reads as a lost peer); a Heartbeat or Candidacy queued
// again for the same election and term while it waited arrives once, the
// latest.
func TestGRPCSlowPeerHoldsNamedMessagesBack(t *testing.T) {
	srv := newFakeReceiver(2)
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	srv.block, srv.entered = block, entered
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg, SendTimeout: 20 * time.Second})
	term := election.NextTerm(0, 1)
	tr.Send(election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "first"})
	select {
	case <-entered: // the peer's goroutine is in its call
	case <-time.After(waitFor):
		t.Fatal("the first message never reached the peer")
	}
	srv.mu.Lock()
	srv.entered = nil
	srv.mu.Unlock()

	const n = 4 * DefaultQueueLen
	for i := range n {
		tr.Send(election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: fmt.Sprintf("jobs-%04d", i)})
	}
	for i := range 10 {
		tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: term, Leader: 2, Election: "jobs-x", Stamp: uint64(i + 1)})
		tr.Send(election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Election: "jobs-y", Value: fmt.Sprint("v", i), Incarnation: 7})
	}
	cli.noFailure(t)
	close(block)

	coordinators, heartbeats, candidacies := 0, 0, 0
	for coordinators < n+1 || heartbeats == 0 || candidacies == 0 {
		in := srv.next(t)
		switch in.Msg.Type {
		case election.MsgCoordinator:
			coordinators++
		case election.MsgHeartbeat:
			heartbeats++
			if in.Msg.Stamp != 10 {
				t.Errorf("the Heartbeat that arrived has stamp %d, want the latest (10)", in.Msg.Stamp)
			}
		case election.MsgCandidacy:
			candidacies++
			if in.Msg.Value != "v9" {
				t.Errorf("the Candidacy that arrived says %q, want the latest (v9)", in.Msg.Value)
			}
		}
	}
	cli.next(t) // the Heartbeat's answer
	cli.noFailure(t)
	select {
	case in := <-srv.got:
		t.Errorf("more arrived than was queued: %+v (heartbeats %d, candidacies %d)", in.Msg, heartbeats, candidacies)
	case <-time.After(100 * time.Millisecond):
	}
}

// A peer that does not answer a named election's call in time may only be
// busy: its messages are lost on the way, not reported (the elections'
// timers decide about it). A peer whose host refuses the connection is
// unreachable, and that is reported.
func TestGRPCNamedMessagesFailOnlyOnARealError(t *testing.T) {
	srv := newFakeReceiver(2)
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	srv.block, srv.entered = block, entered
	t.Cleanup(func() { close(block) })
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg, SendTimeout: 100 * time.Millisecond})
	term := election.NextTerm(0, 1)
	tr.Send(election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: "first"})
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the first message never reached the peer")
	}
	srv.mu.Lock()
	srv.entered = nil
	srv.mu.Unlock()
	for i := range 3 {
		tr.Send(election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1, Election: fmt.Sprint("jobs-", i)})
	}
	eventually(t, "the silent peer's messages counted lost", func() bool {
		return tr.Stats().Failed[election.MsgCoordinator] >= 4
	})
	cli.noFailure(t)

	tr.SetPeer(3, deadAddr(t))
	m := election.Message{Type: election.MsgCoordinator, From: 1, To: 3, Term: term, Leader: 1, Election: "jobs-0"}
	tr.Send(m)
	if f := cli.nextFailure(t); f.m.To != 3 || f.m.Election != m.Election {
		t.Errorf("failure of %+v, want of %+v", f.m, m)
	}
}

// A set keeps no room for a round it no longer queues. After a round of
// thousands of elections' Candidacies (a start, a failover) and a small
// one, the set holds no map sized for the large round: a Go map keeps its
// room after clear, and a peer's set would otherwise keep a slot for every
// election it ever queued for, on every peer, for good. A steady round
// keeps its map (no new map each pass).
func TestNamedSetDropsRoomOfAPastRound(t *testing.T) {
	s := newNamedSet(DefaultNamedQueueLen)
	cand := func(i int) election.Message {
		return election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Election: fmt.Sprintf("jobs-%05d", i)}
	}
	for i := range 5000 {
		s.push(cand(i))
	}
	if got := len(s.take()); got != 5000 {
		t.Fatalf("took %d messages, want 5000", got)
	}
	for round := range 3 {
		for i := range 100 {
			s.push(cand(i))
		}
		if got := len(s.take()); got != 100 {
			t.Fatalf("round %d: took %d messages, want 100", round, got)
		}
		switch {
		case round == 0 && s.at != nil:
			t.Fatalf("after a round of 100 keys the set still holds the map of the round of 5,000 (%d keys at its peak)", s.atPeak)
		case round > 0 && s.at == nil:
			t.Fatalf("round %d: a steady round of 100 keys made a new map", round)
		}
	}
}

// A Candidacy of no election that carries a digest (Message.Held) is
// superseded by a later digest only: the incarnation alone, sent every
// heartbeat interval, says less and is queued beside it.
func TestNamedSetKeepsADigestBesideAnIncarnation(t *testing.T) {
	s := newNamedSet(DefaultNamedQueueLen)
	inc := election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Incarnation: 7}
	digest := inc
	digest.Held = 42
	s.push(digest)
	s.push(inc)
	s.push(inc)
	got := s.take()
	if len(got) != 2 || got[0].Held != 42 || got[1].Held != 0 {
		t.Fatalf("took %+v, want the digest and one incarnation", got)
	}
	digest2 := digest
	digest2.Held = 43
	s.push(digest)
	s.push(digest2)
	if got := s.take(); len(got) != 1 || got[0].Held != 43 {
		t.Fatalf("took %+v, want the later digest only", got)
	}
}

// Messages put back after an overload refusal go before what was queued
// since, in the order refused, call after call; one whose key was queued
// again meanwhile is dropped (the later supersedes it); what does not fit
// under the bound is handed back as lost.
func TestNamedSetPushBackGoesFirst(t *testing.T) {
	s := newNamedSet(100)
	hb := func(name string, term election.Term) election.Message {
		return election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Election: name, Term: term, Leader: 2}
	}
	answer := func(term election.Term) election.Message {
		return election.Message{Type: election.MsgAnswer, From: 1, To: 2, Election: "a", Term: term}
	}
	s.push(hb("b", 5)) // queued since the refusals: supersedes the refused one
	s.push(hb("c", 5))
	s.pushBack([]election.Message{answer(1), hb("a", 5), hb("b", 5)}) // one call's refusals
	s.pushBack([]election.Message{answer(2)})                         // the next call's
	got := s.take()
	want := []election.Message{answer(1), hb("a", 5), answer(2), hb("b", 5), hb("c", 5)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after pushBack the set gave %v, want %v", got, want)
	}
	small := newNamedSet(2)
	small.push(hb("x", 5))
	if lost := small.pushBack([]election.Message{answer(1), answer(2)}); len(lost) != 1 || !reflect.DeepEqual(lost[0], answer(2)) {
		t.Fatalf("a set bounded at 2 holding 1 took back 2 refused messages and lost %v, want the second", lost)
	}
	if n := small.len(); n != 2 {
		t.Fatalf("the bounded set holds %d, want 2", n)
	}
}

// A round taken and given back (recycle) is the next round's slice: a
// round as large fills it without allocating, and what it held is not kept
// alive. One much larger than the round that used it (a failover's, then
// a beat's) is dropped, as the map is.
func TestNamedSetRecyclesARoundOfItsSize(t *testing.T) {
	s := newNamedSet(DefaultNamedQueueLen)
	ms := make([]election.Message, 2000)
	for i := range ms {
		ms[i] = election.Message{Type: election.MsgElection, From: 1, To: 2, Election: fmt.Sprintf("jobs-%05d", i)}
	}
	round := func(n int) []election.Message {
		for _, m := range ms[:n] {
			s.push(m)
		}
		got := s.take()
		if len(got) != n {
			t.Fatalf("took %d messages, want %d", len(got), n)
		}
		return got
	}
	first := round(2000)
	s.recycle(first)
	if first[:cap(first)][0].Election != "" {
		t.Fatal("a recycled round still holds its messages")
	}
	if allocs := testing.AllocsPerRun(5, func() { s.recycle(round(2000)) }); allocs != 0 {
		t.Fatalf("a round as large as the recycled one allocated %v times", allocs)
	}
	s.recycle(round(10))
	if s.spare != nil {
		t.Fatalf("after a round of 10 the set keeps the room of a round of 2,000 (%d)", cap(s.spare))
	}
}
