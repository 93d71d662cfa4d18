package transport

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/electord/electord/election"
)

// countingLink delivers every message to its receiver and counts closes.
type countingLink struct {
	recv   *fakeReceiver
	closed *atomic.Int32
}

func (l countingLink) setAddr(string) {}
func (l countingLink) send(_ context.Context, m election.Message) bool {
	_ = l.recv.Receive(Inbound{Msg: m})
	return false
}
func (l countingLink) close() { l.closed.Add(1) }

// A member that is never sent to costs no goroutine (at 128 processes a
// follower sends to its leader, not to its 126 other peers), and its link
// is closed all the same when it is removed or the queues are closed.
func TestPeerGoroutineStartsWithItsFirstMessage(t *testing.T) {
	const peers = 100
	recv := newFakeReceiver(1)
	var closed atomic.Int32
	q := newSendQueues(recv, 8, func(election.NodeID, string) link { return countingLink{recv, &closed} }, nil)
	before := runtime.NumGoroutine()
	for id := election.NodeID(2); id < 2+peers; id++ {
		q.setPeer(id, "addr")
	}
	if n := sendLoops(); n > 0 {
		t.Fatalf("%d send goroutines for %d peers not sent to, want 0", n, peers)
	}
	q.send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2})
	if got := recv.next(t); got.Msg.To != 2 {
		t.Fatalf("delivered %+v, want the heartbeat to 2", got.Msg)
	}
	if n := sendLoops(); n != 1 {
		t.Fatalf("%d send goroutines after sending to one peer, want 1", n)
	}
	q.removePeer(3) // never sent to: closed here
	if c := closed.Load(); c != 1 {
		t.Fatalf("%d links closed after removing a peer never sent to, want 1", c)
	}
	q.close()
	if c := closed.Load(); c != peers {
		t.Fatalf("%d links closed after close, want all %d", c, peers)
	}
	waitGoroutines(t, before)
}

// sendLoops counts the goroutines running a peer's send loop
// (sendQueues.run), by their stacks: a count of all goroutines would move
// with whatever other tests of the package left ending.
func sendLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "transport.(*sendQueues).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
