package daemon

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// bigElection is a ring Election whose wire form is over 4 KiB, and that
// size.
func bigElection(t *testing.T) (election.Message, int) {
	t.Helper()
	m := election.Message{Type: election.MsgElection, From: 1, To: 2, Term: election.NextTerm(0, 1), Initiator: 1,
		InitiatorRank: election.Rank{ID: 1}}
	for i := range 400 {
		m.Candidates = append(m.Candidates, election.Rank{Priority: int64(i) << 40, ID: election.NodeID(i + 1)})
	}
	x, err := transport.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	n := proto.Size(x)
	if n <= 4096 {
		t.Fatalf("the big Election is %d bytes, want more than 4096", n)
	}
	return m, n
}

// wantSizeRefusal checks that err is ResourceExhausted and names
// max-message-bytes, the message's size and the limit.
func wantSizeRefusal(t *testing.T, err error, size, limit int, verb string) {
	t.Helper()
	st, _ := grpcstatus.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%v, want ResourceExhausted", err)
	}
	for _, want := range []string{"max-message-bytes", fmt.Sprint(size), fmt.Sprint(limit), verb} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("%q does not say %q", st.Message(), want)
		}
	}
	t.Logf("%s", st.Message())
}

// A peer message over max-message-bytes fails with a text that names the
// key and both sizes, whichever side's limit refused it: the receiver's
// (either peer server: a 4 KiB limit, a sender allowing 1 MiB) or the
// sender's own (4 KiB), before it leaves. Before, the sender saw grpc-go's
// or the engine's text, "received message larger than max (N vs. 4096)"
// or "trying to send message larger than max (N vs. 4096)".
func TestOversizedPeerMessageNamesTheKey(t *testing.T) {
	m, size := bigElection(t)
	for _, kind := range []string{"grpc", "lf"} {
		t.Run(kind, func(t *testing.T) {
			srvIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
			addr := servePeerServer(t, nodeConfig(func(c *config.Config) { c.PeerServer, c.MaxMessageBytes = kind, 4096 }),
				transport.NewPeerService(2, srvIn))
			tr, cliIn := grpcPeerClient(t, addr) // max-message-bytes: the default, 1 MiB
			tr.Send(m)
			wantSizeRefusal(t, <-cliIn.failed, size, 4096, "refused")
		})
	}
	t.Run("sender", func(t *testing.T) {
		srvIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
		addr := grpcPeerServer(t, nodeConfig(nil), transport.NewPeerService(2, srvIn))
		cliIn := inbox{got: make(chan transport.Inbound, 16), failed: make(chan error, 16)}
		tr, err := transport.NewGRPC(transport.GRPCConfig{Self: 1, Receiver: cliIn, MaxMessageBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.SetPeer(2, addr)
		tr.Send(m)
		wantSizeRefusal(t, <-cliIn.failed, size, 4096, "not sent")
	})
}
