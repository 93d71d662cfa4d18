package sim

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// TestLeaderLearnsTheRivalLate: the blip scenario, but after the heal it
// is the leader's membership that learns the cut-off node back late (the
// reverse of TestBlipDoesNotMoveTheLeader's LateView). The cut-off node,
// still leading alone, is refused by the bound followers and its own
// announcement to the leader is refused as a non-member's, so the two
// leaderships meet only once the leader's view has the rival. Checked: the
// cluster agrees on the leader within the L1 bound after that view
// completes.
func TestLeaderLearnsTheRivalLate(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, late := range []int{20, 60} {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("%s/late=%d/seed=%d", algo, late, seed), func(t *testing.T) {
					opts := Options{N: 5, Algorithm: algo, Seed: seed}
					h := newHarness(t, opts)
					bound := l1Bound(opts.N, false)
					want := election.NodeID(4)
					h.agreeOn(bound, 5, "cold start")
					if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(want) }); err != nil {
						h.fatalf("transfer: %v", err)
					}
					h.agreeOn(bound, want, "before the fault")
					h.Partition([]election.NodeID{2}, []election.NodeID{1, 3, 4, 5})
					h.run(3 * bound)
					h.LateView(want, 2, late)
					h.Heal()
					h.run(late)
					h.until(bound, "one leader after the leader's view has the rival", func() bool {
						_, _, ok := h.Agreed()
						return ok
					})
					if l, _, _ := h.Agreed(); l != want {
						h.fatalf("agreed on %d, not %d", l, want)
					}
				})
			}
		}
	}
}
