package sim

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// TestRejoiningFollowerDoesNotMoveTheLeader (issue 10, item 4): in quorum
// mode a follower cut off from everyone campaigns on its own, at ever
// higher terms, and none of its rounds can gather a majority. When it comes
// back its stale campaign must neither depose the majority's leader nor
// move its term: the followers, bound by their promises, and the leader,
// whose lease holds, refuse it and name the leader, which the returning
// node follows at the same term. Found by the real-network chaos run (ring,
// --quorum 5, seed 11): node 3's round came back round the ring after the
// heal, named the highest node 5, and leader 4 stepped down for it; later
// a leader moved from term 2144.5 to 2148.5.
//
// The leader is the top node (5) or, after a hand-over, one below it (4);
// the isolated node is below the leader (3, the leader's predecessor on the
// ring) or above it (5). Membership runs as the
// simulator's gossip has it (the isolated node is declared dead and comes
// back whole), or as memberlist had it in the chaos run: the isolated node
// holds every other member dead and, after the heal, learns the leader is
// alive last, so its first round after the heal goes round without it.
func TestRejoiningFollowerDoesNotMoveTheLeader(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, c := range []struct{ leader, isolated election.NodeID }{{5, 3}, {4, 3}, {4, 5}, {5, 4}} {
			for _, gossip := range []bool{true, false} {
				for seed := uint64(1); seed <= 4; seed++ {
					name := fmt.Sprintf("%s/leader=%d/isolated=%d/gossip=%v/seed=%d", algo, c.leader, c.isolated, gossip, seed)
					t.Run(name, func(t *testing.T) {
						opts := Options{N: 5, Algorithm: algo, Quorum: true, Seed: seed}
						if !gossip {
							opts.GossipEvery = 1 << 20 // views change only as the test says
						}
						rejoiningFollower(t, opts, c.leader, c.isolated, gossip)
					})
				}
			}
		}
	}
}

func rejoiningFollower(t *testing.T, opts Options, want, isolated election.NodeID, gossip bool) {
	h := newHarness(t, opts)
	bound := l1Bound(5, true)
	h.agreeOn(bound, 5, "cold start")
	if want != 5 {
		if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(want) }); err != nil {
			h.fatalf("transfer to %d: %v", want, err)
		}
	}
	term := h.agreeOn(bound, want, "before the fault")
	// Let the lease settle (every follower's promise renewed).
	h.run(20)
	if l, tm, ok := h.Agreed(); !ok || l != want || tm != term {
		h.fatalf("leadership moved before the fault: %d at %v, want %d at %v", l, tm, want, term)
	}
	moved := func() bool {
		for i := 1; i <= h.N(); i++ {
			id := election.NodeID(i)
			if id == isolated {
				continue
			}
			st := h.Node(id).Status()
			if st.Leader != want || st.LeaderTerm != term {
				return true
			}
		}
		return false
	}
	view := func(at, of election.NodeID, alive bool) {
		ev := election.Event{Type: election.EventDead, Member: h.member(of)}
		if alive {
			ev.Type = election.EventJoin
		}
		h.Inject(at, ev)
	}
	h.Isolate(isolated)
	if !gossip {
		for i := 1; i <= h.N(); i++ {
			if id := election.NodeID(i); id != isolated {
				view(isolated, id, false)
				view(id, isolated, false)
			}
		}
	}
	// Long enough for the isolated node to time out and campaign several
	// times, each at a higher term.
	h.never(3*bound, fmt.Sprintf("while node %d was isolated, leadership moved off %d at %v", isolated, want, term), moved)
	if st := h.Node(isolated).Status(); st.Term <= term {
		h.fatalf("node %d never campaigned while isolated (term %v): the test proves nothing", isolated, st.Term)
	}
	h.Heal()
	if !gossip {
		for i := 1; i <= h.N(); i++ {
			if id := election.NodeID(i); id != isolated && id != want {
				view(isolated, id, true)
				view(id, isolated, true)
			}
		}
		view(want, isolated, true)
		h.run(1)
		// The isolated node campaigns again (its timer may not have run
		// out yet), and learns of the leader a round trip later.
		if err := h.do(isolated, func(c election.StateMachine) error { c.Campaign(); return nil }); err != nil {
			h.fatalf("campaign: %v", err)
		}
		h.never(3*h.N(), fmt.Sprintf("before node %d saw the leader again, leadership moved off %d at %v", isolated, want, term), moved)
		view(isolated, want, true)
	}
	what := fmt.Sprintf("after node %d rejoined, leadership moved off %d at %v", isolated, want, term)
	h.until(bound, "the rejoining node follows the leader", func() bool {
		if moved() {
			h.fatalf("%s", what)
		}
		st := h.Node(isolated).Status()
		return st.Leader == want && st.LeaderTerm == term
	})
	h.never(3*bound, what, func() bool { return moved() || h.Node(isolated).Status().Leader != want })
}
