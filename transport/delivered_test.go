package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// An Election whose RPC succeeded is reported delivered: the peer's process
// took it. One the peer refused as overloaded is reported failed, with an
// error PeerOverloaded recognises (the peer is alive), and not delivered.
func TestGRPCReportsDeliveredElections(t *testing.T) {
	srv := newFakeReceiver(2)
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{})
	m := election.Message{Type: election.MsgElection, From: 1, To: 2, Term: election.NextTerm(0, 1), Initiator: 1}
	tr.Send(m)
	srv.next(t)
	select {
	case got := <-cli.delivered:
		if got.Type != election.MsgElection || got.To != 2 || got.Term != m.Term {
			t.Fatalf("delivered %+v, want the Election to 2", got)
		}
	case <-time.After(waitFor):
		t.Fatal("the Election was not reported delivered")
	}
	cli.noFailure(t)

	srv.setErr(ErrOverloaded)
	tr.Send(m)
	f := cli.nextFailure(t)
	if !PeerOverloaded(f.err) {
		t.Fatalf("an overloaded peer's refusal %v: PeerOverloaded = false", f.err)
	}
	select {
	case got := <-cli.delivered:
		t.Fatalf("a refused Election reported delivered: %+v", got)
	default:
	}
	if PeerOverloaded(errors.New("connection refused")) || PeerOverloaded(ErrNotServing) {
		t.Error("PeerOverloaded is true for a refused connection or a node that does not serve")
	}
}
