package transport

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
)

// A peer that does not answer costs the messages queued for it one send
// timeout in all, not one each: when an RPC reaches its deadline, the
// messages queued behind it fail at once with ErrPeerSilent, and a message
// sent after that gets its own attempt.
func TestSilentPeerFailsQueuedMessages(t *testing.T) {
	srv := newFakeReceiver(2)
	block := make(chan struct{})
	srv.block = block // the server takes every call and never answers
	const timeout = 200 * time.Millisecond
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg, SendTimeout: timeout})
	term := election.NextTerm(0, 1)
	start := time.Now()
	for range 4 {
		tr.Send(election.Message{Type: election.MsgElection, From: 1, To: 2, Term: term, Initiator: 1})
	}
	first := cli.nextFailure(t)
	if status.Code(first.err) != codes.DeadlineExceeded {
		t.Fatalf("first failure: %v, want DeadlineExceeded", first.err)
	}
	for i := range 3 {
		f := cli.nextFailure(t)
		if !errors.Is(f.err, ErrPeerSilent) {
			t.Fatalf("queued message %d: %v, want ErrPeerSilent", i+2, f.err)
		}
	}
	// One send timeout, not four (and some slack for a loaded machine).
	if el := time.Since(start); el > 3*timeout {
		t.Errorf("4 messages to a silent peer failed after %v, want about %v", el, timeout)
	}
	close(block)
	tr.Send(election.Message{Type: election.MsgElection, From: 1, To: 2, Term: term, Initiator: 1})
	eventually(t, "the next message delivered", func() bool { return tr.Stats().Sent[election.MsgElection] == 1 })
	cli.noFailure(t)
}
