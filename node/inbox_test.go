package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

func namedIn(typ election.MsgType, value string) transport.Inbound {
	return transport.Inbound{Msg: election.Message{Type: typ, From: 2, To: 1, Election: "shard-1", Value: value, Confirmed: true}}
}

// A burst of named messages far past the default election's bound queues
// (a start's Candidacies from every peer), while the default election's
// queue stays free for its own; past that bound, the named messages that
// ask for an answer in time are refused at once as overloaded.
func TestNamedInboxTakesABurstAndRefusesAsksPastTheDefaultBound(t *testing.T) {
	in := NewInbox(0)
	in.serving.Store(true)
	burst := 4 * inboxSize(0)
	for i := range burst {
		typ := election.MsgCandidacy
		if i%2 == 1 {
			typ = election.MsgCoordinator
		}
		if err := in.Receive(namedIn(typ, "app")); err != nil {
			t.Fatalf("named message %d of a burst of %d: %v", i, burst, err)
		}
	}
	for _, typ := range []election.MsgType{election.MsgElection, election.MsgHeartbeat} {
		if err := in.Receive(namedIn(typ, "")); !errors.Is(err, transport.ErrOverloaded) {
			t.Fatalf("a named %v behind %d queued: %v, want refused as overloaded", typ, burst, err)
		}
	}
	hb := transport.Inbound{Msg: election.Message{Type: election.MsgHeartbeat, From: 2, To: 1, Term: 1}}
	if err := in.Receive(hb); err != nil {
		t.Fatalf("the default election's heartbeat behind a named burst: %v", err)
	}
	if got := in.counters.InboxFull.Load(); got != 2 {
		t.Fatalf("refusals counted %d, want 2", got)
	}
	in.drain()
	if in.named.Len() != 0 || in.namedBytes.Load() != 0 {
		t.Fatalf("after drain: %d queued, %d bytes counted", in.named.Len(), in.namedBytes.Load())
	}
	if err := in.Receive(namedIn(election.MsgElection, "")); err != nil {
		t.Fatalf("a named Election to an emptied inbox: %v", err)
	}
}

// The named queue's strings are bounded too: a flood of the longest values
// is refused once their bytes reach namedInboxBytes, whatever the count,
// and taking messages frees their share.
func TestNamedInboxBoundsTheBytesItHolds(t *testing.T) {
	in := NewInbox(0)
	in.serving.Store(true)
	long := strings.Repeat("v", 1024)
	per := int64(len("shard-1") + len(long))
	fits := int(namedInboxBytes / per)
	for i := range fits {
		if err := in.Receive(namedIn(election.MsgCandidacy, long)); err != nil {
			t.Fatalf("candidacy %d of %d that fit: %v", i, fits, err)
		}
	}
	if err := in.Receive(namedIn(election.MsgCandidacy, long)); !errors.Is(err, transport.ErrOverloaded) {
		t.Fatalf("past %d bytes: %v, want refused as overloaded", namedInboxBytes, err)
	}
	if _, ok := in.popNamed(); !ok {
		t.Fatal("nothing queued")
	}
	if err := in.Receive(namedIn(election.MsgCandidacy, long)); err != nil {
		t.Fatalf("after one was taken: %v", err)
	}
}

// A pass takes a batch of named messages only while no message of the
// default election waits: that one is not held behind the batch.
func TestNamedBatchYieldsToTheDefaultElection(t *testing.T) {
	in := NewInbox(0)
	n, err := New(fast(Config{Self: Meta{ID: 1}, Algorithm: "bully", Inbox: in,
		Transport: transport.NewNetwork().Join(1, in), NewMembership: func() (Membership, error) { return nil, errors.New("unused") }}))
	if err != nil {
		t.Fatal(err)
	}
	in.serving.Store(true)
	for range 2 * maxNamedBatch {
		if err := in.Receive(namedIn(election.MsgCandidacy, "app")); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Receive(transport.Inbound{Msg: election.Message{Type: election.MsgHeartbeat, From: 2, To: 1, Term: 1}}); err != nil {
		t.Fatal(err)
	}
	n.moreNamed()
	if got := in.named.Len(); got != 2*maxNamedBatch {
		t.Fatalf("with a default-election message waiting, the batch took %d named messages, want 0", 2*maxNamedBatch-got)
	}
	in.msgs.Pop()
	n.moreNamed()
	if got := in.named.Len(); got != maxNamedBatch+1 {
		t.Fatalf("with none waiting, the batch took %d named messages, want %d", 2*maxNamedBatch-got, maxNamedBatch-1)
	}
}
