package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestTransferWithUnevenDelays: messages take 1 to 4 ticks, so a follower's
// heartbeat can reach the old leader after it handed over and before the
// target's announcement reaches the follower. The old leader must not turn
// that follower into a rival candidate: the transfer target leads, and no
// Election is sent. (Found in CI: node 5 took over from a transfer to 2.)
func TestTransferWithUnevenDelays(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(algo, func(t *testing.T) {
			for seed := uint64(1); seed <= 30; seed++ {
				// A round trip takes up to 8 ticks; the leader timeout is well
				// above it, as 250ms is above loopback round trips.
				h := newHarness(t, Options{N: 5, Algorithm: algo, Seed: seed,
					Tune: func(c *election.Config) { c.LeaderTimeoutTicks = 20 }})
				h.agreeOn(400, 5, "cold start")
				h.MaxDelay = 3
				h.run(20)
				h.ResetCounts()
				if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(2) }); err != nil {
					h.fatalf("Transfer(2): %v", err)
				}
				h.agreeOn(40, 2, "after transfer to 2")
				if got := h.Counts[election.MsgElection]; got != 0 {
					h.fatalf("%d Election messages during a transfer (%s)", got, h.counts())
				}
				h.never(100, "leadership moved away from 2 after transfer", func() bool {
					l, _, ok := h.Agreed()
					return ok && l != 2
				})
			}
		})
	}
}

// TestTransferToACrashedNode: the target crashed just before the transfer
// (membership has not noticed). The old leader acknowledges heartbeats for
// one leader timeout only, so the others still elect a new leader soon.
func TestTransferToACrashedNode(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(algo, func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				h := newHarness(t, Options{N: 5, Algorithm: algo, Seed: seed})
				h.agreeOn(L1Bound(5), 5, "cold start")
				h.Crash(2)
				if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(2) }); err != nil {
					h.fatalf("Transfer(2): %v", err)
				}
				start := h.Now()
				lt := h.Config(1).LeaderTimeoutTicks
				// The ack window, then a jittered leader timeout, then an election.
				h.agreeOn(4*lt+L1Bound(5), 4, "after a transfer to a crashed node")
				h.t.Logf("%s seed %d: node 4 leads %d ticks after the failed transfer", algo, seed, h.Now()-start)
			}
		})
	}
}
