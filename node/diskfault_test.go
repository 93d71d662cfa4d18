package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// A term-store fault halts a node until a save succeeds. Its named clock
// runs on after that: on a node that stands (its clock fired while the
// loop applied nothing) and on one that only observes (its clock stopped
// while it was halted), or the first would tick none of its elections
// again and the second would send no digest, and get every candidacy again
// every period. The fault is the node's own handling of a refused save
// (storeFailed), from which it recovers at its first retry.
func TestNamedClockRunsOnAfterATermStoreFault(t *testing.T) {
	c, _ := quietClusterStanding(t, "bully", 20, nil, 1, 2) // node 3 stands in none
	ctx := context.Background()
	for _, id := range []election.NodeID{2, 3} {
		nd := c.nodes[id]
		if err := nd.do(ctx, func() error {
			nd.storeFailed(errors.New("disk full (test)"), Persisted{})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var digests atomic.Int64
	c.net.SetHook(func(m election.Message) bool {
		if m.Type == election.MsgCandidacy && m.Election == "" && m.From == 3 && m.Held != 0 {
			digests.Add(1)
		}
		return true
	})
	for _, id := range []election.NodeID{2, 3} {
		nd := c.nodes[id]
		var halted bool
		var period uint64
		read := func() {
			if err := nd.do(ctx, func() error {
				halted, period = nd.halted(), nd.named.resend.period
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for read(); halted; read() {
			if time.Now().After(deadline) {
				t.Fatalf("node %d still halted 5 s after its fault", id)
			}
			time.Sleep(10 * time.Millisecond) // polling interval
		}
		from := period
		for read(); period < from+2; read() { // two periods of 400 ms
			if time.Now().After(deadline) {
				t.Fatalf("node %d's named clock counted %d periods in the 5 s after its fault, want 2", id, period-from)
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}
	if digests.Load() == 0 {
		t.Fatal("node 3 sent no digest after its fault")
	}
}
