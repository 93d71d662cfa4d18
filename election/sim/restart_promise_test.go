package sim

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// TestRestartedFollowerKeepsItsPromise: in quorum mode a follower that
// crashes just after it echoed its leader's stamp, and restarts at once,
// must not acknowledge a rival's proposal while the leader may still count
// it towards its lease. The promise lived in memory only, so the restarted
// node holds off for PromiseTicks after it starts: it neither acknowledges
// a proposal nor proposes (docs/ALGORITHMS.md, "Quorum mode: leases and
// promises"). Property seed 104052 (bully, n=3) found it: leader 3 counted
// node 1 until tick 61, node 1 restarted at tick 55 and acknowledged node
// 2's proposal at 58, and node 2 led at 59 beside 3 (Q1).
//
// The rival is node 2, cut off from leader 3 both ways but not from node
// 1, so its promise to 3 has ended and it campaigns; before the crash node
// 1, bound to 3, refuses it. Node 1 restarts while a proposal of node 2
// is on its way to it. The test fails if node 1 acknowledges node 2 within
// PromiseTicks of its restart (the checker's Q1 fails with it).
//
// Bully only: a ring rival's round must pass the leader, whose lease refuses
// it, so in this topology it never gets to propose (the rule is the core's,
// and election's TestRestartHoldsOffInQuorumMode checks it for any
// algorithm).
func TestRestartedFollowerKeepsItsPromise(t *testing.T) {
	for seed := uint64(1); seed <= uint64(*scenarioSeeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			restartedFollower(t, seed)
		})
	}
}

func restartedFollower(t *testing.T, seed uint64) {
	h := newHarness(t, Options{N: 3, Algorithm: "bully", Quorum: true, Seed: seed})
	bound := l1Bound(3, true)
	h.agreeOn(bound, 3, "cold start")
	h.run(20) // every follower's promise renewed
	promise := uint64(h.Config(1).Defaults().PromiseTicks())

	// Node 2 loses the leader but still reaches node 1.
	h.Cut(2, 3)
	h.Cut(3, 2)
	var proposals, acks []uint64 // ticks node 2 proposed to node 1, and node 1 acknowledged node 2
	h.Hook = func(m election.Message) bool {
		switch {
		case m.Type == election.MsgCoordinator && !m.Confirmed && m.From == 2 && m.To == 1:
			proposals = append(proposals, h.Now())
		case m.Type == election.MsgCoordinatorAck && m.From == 1 && m.To == 2:
			acks = append(acks, h.Now())
		}
		return true
	}
	// Node 2, its promise to 3 over, proposes; node 1, bound to 3, would
	// refuse. The proposal is on the wire: node 1 crashes and restarts at
	// once, between two ticks, so the proposal reaches the restarted node,
	// which echoed 3's stamp a tick or two ago (3 counts it for LeaseTicks
	// from then).
	h.until(4*bound, "node 2 proposing", func() bool { return len(proposals) > 0 })
	if ls := h.Leaders(); len(ls) != 1 || ls[0] != 3 {
		h.fatalf("before the crash: leaders %v, want [3]", ls)
	}
	h.Crash(1)
	if err := h.Restart(1); err != nil {
		h.fatalf("restart: %v", err)
	}
	restartedAt := h.Now()
	h.run(int(promise) - 1)
	if len(acks) != 0 {
		h.fatalf("node 1, restarted at tick %d, acknowledged node 2's proposals (sent at %v) at ticks %v, within PromiseTicks (%d) of its start",
			restartedAt, proposals, acks, promise)
	}
	// Once the promise could have ended, a leader is agreed again.
	h.Heal()
	h.agree(3*bound, "after the restart")
}
