package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/electord/electord/election"
)

// TestBlipDoesNotMoveTheLeader: in plain mode a node or a minority cut off
// for a while elects a leader of its own (plain mode's availability
// promise), at a term above the majority's. When the partition heals, the
// leader the larger side kept following keeps leading, at a term that may
// rise above every term used on either side (no node's reported
// leadership term goes back), and the cut-off side yields. Found on real
// processes (ring and bully, five nodes, iptables cuts): a partition [2] |
// [1, 3, 4, 5] held 3.6 s while node 4 led the four, and after the heal
// node 2, which had elected itself alone at a higher term, led everyone.
//
// The leader is node 4 (handed over from the top node, so that a cut-off
// node can rank above it) or the top node 5; the cut-off side is one node
// below or above the leader, or two nodes. Membership runs as the
// simulator's gossip has it, or the cut-off side learns the leader is
// alive last after the heal (Sim.LateView), as memberlist had it.
func TestBlipDoesNotMoveTheLeader(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, c := range blipCases {
			for _, late := range []bool{false, true} {
				for seed := uint64(1); seed <= 3; seed++ {
					name := fmt.Sprintf("%s/leader=%d/cut=%v/late=%v/seed=%d", algo, c.leader, c.cut, late, seed)
					t.Run(name, func(t *testing.T) {
						blip(t, Options{N: 5, Algorithm: algo, Seed: seed}, c.leader, c.cut, late)
					})
				}
			}
		}
	}
}

// blipCases are the leaders and the cut-off sides of the blip tests: the
// leader is node 4 (handed over from the top node, so that a cut-off node
// can rank above it) or the top node 5; the cut-off side is one node below
// or above the leader, or two nodes.
var blipCases = []struct {
	leader election.NodeID
	cut    []election.NodeID
}{
	{4, []election.NodeID{2}},
	{4, []election.NodeID{5}},
	{5, []election.NodeID{1}},
	{4, []election.NodeID{1, 2}},
	{4, []election.NodeID{1, 3}},
	{5, []election.NodeID{3, 4}},
}

// leadWith has the cluster agree on leader want (handed over from the top
// node, if it is not the top node) and returns its term and the nodes not
// in cutOff, the larger side.
func leadWith(h *harness, want election.NodeID, cutOff []election.NodeID) (election.Term, []election.NodeID) {
	h.t.Helper()
	n := election.NodeID(h.N())
	bound := l1Bound(h.N(), false)
	h.agreeOn(bound, n, "cold start")
	if want != n {
		if err := h.do(n, func(c election.StateMachine) error { return c.Transfer(want) }); err != nil {
			h.fatalf("transfer to %d: %v", want, err)
		}
	}
	term := h.agreeOn(bound, want, "before the fault")
	var larger []election.NodeID
	for _, id := range ids(h.N()) {
		if !slices.Contains(cutOff, id) {
			larger = append(larger, id)
		}
	}
	return term, larger
}

func blip(t *testing.T, opts Options, want election.NodeID, cutOff []election.NodeID, late bool) {
	h := newHarness(t, opts)
	bound := l1Bound(opts.N, false)
	term, larger := leadWith(h, want, cutOff)
	// The larger side keeps its leader at its term throughout the fault.
	moved := func(at []election.NodeID, minTerm election.Term) (election.NodeID, bool) {
		for _, id := range at {
			st := h.Node(id).Status()
			if st.Leader != want || st.LeaderTerm < minTerm {
				return id, true
			}
		}
		return 0, false
	}
	h.Partition(cutOff, larger)
	h.never(3*bound, fmt.Sprintf("while %v was cut off, the larger side moved off leader %d at %v", cutOff, want, term),
		func() bool { _, bad := moved(larger, term); return bad })
	// Plain mode's availability promise: the cut-off side elected a leader
	// of its own (else the test proves nothing).
	if l, lt, ok := h.groupAgreed(cutOff...); !ok || lt <= term {
		h.fatalf("the cut-off side %v has no leader of its own above %v (leader %d at %v): the test proves nothing", cutOff, term, l, lt)
	}
	if late {
		for _, id := range cutOff {
			h.LateView(id, want, 4*opts.N)
		}
	}
	h.Heal()
	// From the heal on, no node of the larger side names another leader
	// than want, and its term never goes back (the checker's S3); every
	// node follows want within the L1 bound.
	what := fmt.Sprintf("after %v rejoined, leadership moved off %d", cutOff, want)
	h.until(bound, "every node follows the leader again", func() bool {
		if id, bad := moved(larger, term); bad {
			h.fatalf("%s: node %d: %+v", what, id, h.Node(id).Status())
		}
		l, _, ok := h.Agreed()
		return ok && l == want
	})
	_, healed, _ := h.Agreed()
	h.never(3*bound, what, func() bool {
		l, tm, ok := h.Agreed()
		return !ok || l != want || tm != healed
	})
}
