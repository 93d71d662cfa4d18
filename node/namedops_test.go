package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// A named election's leadership is handed to another candidate on command:
// it leads at a higher term, the app that led stays a candidate and
// follows it, and an observer shows the new leader. A follower, a target
// that does not stand and (with preempt) a target another candidate
// outranks are refused, each naming the election and the node.
func TestNamedElectionTransfer(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 4)
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			a, led := standIn(t, c.nodes[1], "a", 0, EventLeader)
			standIn(t, c.nodes[2], "b", 5, EventFollower)
			d, _ := standIn(t, c.nodes[4], "d", 1, EventFollower)
			observed(t, c.nodes[3], "jobs", 1, "a", 10*time.Second)

			if err := c.nodes[2].TransferElection(ctx, "jobs", 4); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("a follower's transfer: %v, want ErrNotLeader", err)
			}
			err := c.nodes[1].TransferElection(ctx, "jobs", 3)
			if !errors.Is(err, ErrNotCandidate) || err.Error() != "transfer: node 3 does not stand in jobs (no app campaigns there through it)" {
				t.Fatalf("a transfer to an observer: %v, want ErrNotCandidate naming node 3 and jobs", err)
			}
			// With preempt, node 2 (priority 5) would depose node 4
			// (priority 1) at once: refused. (Turned on in the loop for the
			// check alone; the machines were built without it.)
			_ = c.nodes[1].do(ctx, func() error { c.nodes[1].cfg.Preempt = true; return nil })
			if err := c.nodes[1].TransferElection(ctx, "jobs", 4); !errors.Is(err, ErrPreempted) {
				t.Fatalf("a transfer preempt would undo: %v, want ErrPreempted", err)
			}
			_ = c.nodes[1].do(ctx, func() error { c.nodes[1].cfg.Preempt = false; return nil })
			if err := c.nodes[1].TransferElection(ctx, "jobs", 1); err != nil {
				t.Fatalf("a transfer to the leader itself: %v", err)
			}

			if err := c.nodes[1].TransferElection(ctx, "jobs", 4); err != nil {
				t.Fatal(err)
			}
			won := nextEvent(t, d, 10*time.Second, isEvent(EventLeader))
			if won.Leader.ID != 4 || won.Leader.Term <= led.Leader.Term || won.Leader.Value != "d" {
				t.Fatalf("after the transfer d sees %+v; a led at %v", won.Leader, led.Leader.Term)
			}
			f := nextEvent(t, a, 10*time.Second, func(ev CandidacyEvent) bool { return ev.Event == EventFollower && ev.Leader.ID == 4 })
			if f.QueuedBehind != 0 {
				t.Fatalf("a after the transfer: %+v", f)
			}
			for _, id := range []election.NodeID{1, 2, 3} {
				observed(t, c.nodes[id], "jobs", 4, "d", 10*time.Second)
			}
		})
	}
}

// An observer shows a named leadership's since as the leader's own clock
// says it began (the Candidacy carries it), not the zero time; a new
// leadership brings its own.
func TestNamedElectionObserverSince(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	a, led := standIn(t, c.nodes[1], "a", 0, EventLeader)
	if led.Leader.Since.IsZero() {
		t.Fatalf("the leader's own since is zero: %+v", led.Leader)
	}
	seen := observed(t, c.nodes[3], "jobs", 1, "a", 10*time.Second)
	if !seen.Since.Equal(led.Leader.Since) {
		t.Fatalf("observer's since %v, the leader's %v", seen.Since, led.Leader.Since)
	}
	b, _ := standIn(t, c.nodes[2], "b", 0, EventFollower)
	a.Close()
	won := nextEvent(t, b, 10*time.Second, isEvent(EventLeader))
	seen = observed(t, c.nodes[3], "jobs", 2, "b", 10*time.Second)
	if !seen.Since.Equal(won.Leader.Since) || !seen.Since.After(led.Leader.Since) {
		t.Fatalf("observer's since %v after the handover; the new leader's %v, the old one's %v", seen.Since, won.Leader.Since, led.Leader.Since)
	}
	// A proclaim resends the candidacy; the leadership's start stays.
	if err := b.Proclaim(ctx, "b2"); err != nil {
		t.Fatal(err)
	}
	if again := observed(t, c.nodes[3], "jobs", 2, "b2", 10*time.Second); !again.Since.Equal(won.Leader.Since) {
		t.Fatalf("after a proclaim the observer's since is %v, want %v", again.Since, won.Leader.Since)
	}
}

// standIn campaigns in "jobs" through nd until the test ends, and waits for
// the candidacy's first event named want.
func standIn(t *testing.T, nd *Node, value string, priority int64, want string) (*Candidacy, CandidacyEvent) {
	t.Helper()
	c, err := nd.Campaign(context.Background(), "jobs", value, priority)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, nextEvent(t, c, 10*time.Second, isEvent(want))
}
