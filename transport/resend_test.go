package transport

import (
	"net"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// TestGRPCResendToARestartedPeerIsOneCall: a peer's process dies, its
// channel backs off from refused dials, and the process comes back on the
// same port with a handler slower than resendSlice (its node loop is busy).
// The resend that follows the accepted probe must make one call that waits
// for the answer, not one per slice: the slices bounded the whole call,
// which was cut and made again until the send timeout, so the message was
// delivered many times and then reported failed (DeadlineExceeded, and the
// messages queued behind it with ErrPeerSilent).
func TestGRPCResendToARestartedPeerIsOneCall(t *testing.T) {
	for _, typ := range []election.MsgType{election.MsgAnswer, election.MsgHeartbeat} {
		t.Run(typ.String(), func(t *testing.T) {
			cli := newFakeReceiver(1)
			tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli, ReconnectBackoff: time.Hour})
			addr, stop := serveStoppable(t, 2, newFakeReceiver(2))
			tr.SetPeer(2, addr)
			m := election.Message{Type: typ, From: 1, To: 2, Term: 1, Leader: 2}
			tr.Send(m)
			waitSent(t, tr, typ, 1)

			stop() // the channel's dials are refused and it backs off (for an hour)
			for range 2 {
				tr.Send(m)
				for !isFailureOf(cli.nextFailure(t), m) { // skip the dropped connection's report
				}
			}

			lis, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("cannot listen on %s again: %v", addr, err)
			}
			srv := newFakeReceiver(2)
			srv.entered = make(chan struct{}, 64)
			srv.block = make(chan struct{})
			released := false
			release := func() {
				if !released {
					released = true
					close(srv.block)
				}
			}
			s2 := NewGRPCServer(NewPeerService(2, srv), maxMsg)
			done := make(chan struct{})
			go func() { defer close(done); _ = s2.Serve(lis) }()
			t.Cleanup(func() { release(); s2.Stop(); <-done })

			tr.Send(m)
			select {
			case <-srv.entered:
			case <-time.After(waitFor):
				t.Fatalf("the restarted peer got no call within %v", waitFor)
			}
			// The handler holds the call for several slices: a cut call is
			// made again within one slice and a probe.
			hold := time.NewTimer(8 * resendSlice)
			defer hold.Stop()
			for holding := true; holding; {
				select {
				case <-srv.entered:
					t.Fatalf("the message was delivered again while the first call waited for its answer")
				case f := <-cli.failed:
					if isFailureOf(f, m) {
						t.Fatalf("the call was reported failed while the peer was answering it: %v", f.err)
					}
				case <-hold.C:
					holding = false
				}
			}
			release()
			waitSent(t, tr, typ, 2)
			if n := len(srv.entered); n != 0 {
				t.Fatalf("the message was delivered %d more times", n)
			}
			for {
				select {
				case f := <-cli.failed:
					if isFailureOf(f, m) {
						t.Fatalf("the message delivered to the restarted peer was also reported failed: %v", f.err)
					}
					continue
				default:
				}
				break
			}
		})
	}
}

// isFailureOf reports whether f is m's failure, not the report of a dropped
// connection (a term-0 heartbeat).
func isFailureOf(f failure, m election.Message) bool {
	return f.m.Type == m.Type && f.m.Term == m.Term
}

// waitSent waits until tr counts n messages of type typ as sent.
func waitSent(t *testing.T, tr *GRPC, typ election.MsgType, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(waitFor); tr.Stats().Sent[typ] < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d %v sent within %v, want %d", tr.Stats().Sent[typ], typ, waitFor, n)
		}
	}
}
