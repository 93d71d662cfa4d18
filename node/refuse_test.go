package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// failures is a transport.Receiver that records send failures.
type failures chan error

func (f failures) Receive(transport.Inbound) error    { return nil }
func (f failures) Failed(_ election.Message, e error) { f <- e }

// A ring node still bootstrapping (its view short of BootstrapExpect)
// refuses an Election through the transport, so its sender skips it at
// once; once its view is complete it takes Elections again.
func TestBootstrappingRingNodeRefusesElections(t *testing.T) {
	net := transport.NewNetwork()
	hub := &gossipHub{members: map[election.NodeID]*fakeGossip{}}
	store, err := OpenTermStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := NewInbox(0)
	self := Meta{ID: 1, PeerAddr: "mem:1"}
	nd, err := New(fast(Config{Self: self, Algorithm: "ring", Store: store, Transport: net.Join(1, in), Inbox: in,
		BootstrapExpect: 2, NewMembership: func() (Membership, error) { return hub.join(self), nil }}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-nd.Done() })
	go nd.Run(ctx)

	sent := failures(make(chan error, 16))
	sender := net.Join(2, sent)
	sender.SetPeer(1, "mem:1")
	election2 := election.Message{Type: election.MsgElection, From: 2, To: 1, Term: election.NextTerm(0, 2),
		Initiator: 2, InitiatorRank: election.Rank{ID: 2}, Candidates: []election.Rank{{ID: 2}}}
	deadline := time.Now().Add(10 * time.Second)
	for { // until the node serves peers
		if time.Now().After(deadline) {
			t.Fatal("the node did not refuse an Election within 10 s")
		}
		sender.Send(election2)
		var err error
		select {
		case err = <-sent:
		case <-time.After(time.Second):
			t.Fatal("a bootstrapping ring node took an Election instead of refusing it")
		}
		if errors.Is(err, transport.ErrNotServing) || strings.Contains(err.Error(), transport.ErrNotServing.Error()) {
			continue // its loop has not started yet
		}
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), transport.ErrNotReady.Error()) {
			t.Fatalf("a bootstrapping ring node refused an Election with %v, want FailedPrecondition: %v", err, transport.ErrNotReady)
		}
		break
	}
	hub.join(Meta{ID: 2, PeerAddr: "mem:2"}) // the view reaches BootstrapExpect
	for {
		if time.Now().After(deadline) {
			t.Fatal("the node still refuses Elections 10 s after its view reached BootstrapExpect")
		}
		sender.Send(election2)
		select {
		case <-sent:
			time.Sleep(10 * time.Millisecond) // not formed yet: send again
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
}
