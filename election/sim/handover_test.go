package sim

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// TestHandoverIsNotHeld: in plain mode followers bound to their leader hold
// a rival's announcement with less support (plain_mode.go), so a resign or
// a transfer must hand the leader's support on to its successor, or every
// follower would hold the successor's announcement and wait to find its
// old leader gone. Ring: the resigning initiator's round announcement
// carries it (the initiator follows the winner before it sends it);
// transfer and the bully's resign: the TimeoutNow. The successor leads and
// every node follows it within the hops the handover needs, with no
// Election sent after a transfer. Heartbeats go every 10 ticks, so that
// followers are still bound when the handover's announcement comes (on
// real processes a hop takes a millisecond and a heartbeat interval 200).
func TestHandoverIsNotHeld(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, op := range []string{"resign", "transfer"} {
			for seed := uint64(1); seed <= 5; seed++ {
				t.Run(fmt.Sprintf("%s/%s/seed=%d", algo, op, seed), func(t *testing.T) {
					h := newHarness(t, Options{N: 5, Algorithm: algo, Seed: seed, Tune: func(c *election.Config) {
						c.HeartbeatTicks, c.LeaderTimeoutTicks = 10, 30
					}})
					h.agreeOn(400, 5, "cold start")
					h.run(20)
					h.ResetCounts()
					err := h.do(5, func(c election.StateMachine) error {
						if op == "resign" {
							return c.Resign()
						}
						return c.Transfer(3)
					})
					if err != nil {
						h.fatalf("%s: %v", op, err)
					}
					// A ring round is n Election hops and one hop of
					// Coordinators, to every node at once; the bully's
					// resign and a transfer take two.
					within := 3
					if op == "resign" && algo == "ring" {
						within = 5 + 1
					}
					l, _ := h.agree(within, "after the "+op)
					if l == 5 {
						h.fatalf("the node that handed over leads again")
					}
					if got := h.Counts[election.MsgElection]; op == "transfer" && got != 0 {
						h.fatalf("%d Elections during a transfer (%s)", got, h.counts())
					}
				})
			}
		}
	}
}
