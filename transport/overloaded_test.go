package transport

import (
	"errors"
	"testing"

	"github.com/electord/electord/election"
)

// An Election the peer's process refused as overloaded (its inbox full) is
// reported failed with an error PeerOverloaded recognises, through a real
// gRPC server: the peer is alive. A refused connection or a node that does
// not serve is not "overloaded".
func TestGRPCReportsAnOverloadedPeer(t *testing.T) {
	srv := newFakeReceiver(2)
	_, _, cli, tr := pairGRPC(t, srv, GRPCConfig{MaxMessageBytes: maxMsg})
	srv.setErr(ErrOverloaded)
	tr.Send(election.Message{Type: election.MsgElection, From: 1, To: 2, Term: election.NextTerm(0, 1), Initiator: 1})
	f := cli.nextFailure(t)
	if !PeerOverloaded(f.err) {
		t.Fatalf("an overloaded peer's refusal %v: PeerOverloaded = false", f.err)
	}
	if PeerOverloaded(errors.New("connection refused")) || PeerOverloaded(ErrNotServing) {
		t.Error("PeerOverloaded is true for a refused connection or a node that does not serve")
	}
}
