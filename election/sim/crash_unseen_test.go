package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestCrashUnseenByTheHighestSurvivor: the leader's process dies; the lower
// survivors learn it at once (their connections are refused: the node loop
// turns that into EventLeaderTimeout), the highest survivor does not (it has
// no connection to the leader, e.g. it restarted moments ago, or its probe
// is still under way). A lower node's Election reached it while its leader
// still looked fresh, and it sent the node back to the dead leader; everyone
// then waited for its next heartbeat, one interval later: the ~200 ms crash
// failovers of bully (issue 10). It now asks its leader at once (a heartbeat
// out of turn), which the transport finds refused.
//
// Timings are the daemon's at a 10 ms tick (heartbeat 200 ms, timeout 600 ms,
// answer timeout 30 ms). The hook plays the transport and node.peerGone: a
// heartbeat to the crashed leader is refused, and its sender suspects it.
func TestCrashUnseenByTheHighestSurvivor(t *testing.T) {
	const hb = 20
	// Gossip never runs: it would declare the leader dead within a few
	// ticks, where memberlist takes seconds.
	h := newHarness(t, Options{N: 5, Algorithm: "bully", Seed: 7, GossipEvery: 1 << 20, Tune: func(c *election.Config) {
		c.HeartbeatTicks, c.LeaderTimeoutTicks, c.JitterTicks = hb, 60, 15
		c.AnswerTimeoutTicks, c.ElectionTimeoutTicks = 3, 60
	}})
	h.agreeOn(L1Bound(5)*hb, 5, "cold start")
	var refused []election.NodeID
	sent4 := false
	h.Hook = func(m election.Message) bool {
		if m.Type == election.MsgHeartbeat && m.To == 5 {
			if h.Up(5) {
				sent4 = sent4 || m.From == 4
			} else {
				refused = append(refused, m.From)
			}
		}
		return true
	}
	// Crash 5 right after 4's heartbeat, so 4's next one is a whole
	// interval away.
	h.until(2*hb, "4 heartbeating 5", func() bool { return sent4 })
	h.Crash(5)
	suspect := func(id election.NodeID) {
		if err := h.do(id, func(c election.StateMachine) error {
			c.Observe(election.Event{Type: election.EventLeaderTimeout})
			return nil
		}); err != nil {
			h.fatalf("leader timeout on %d: %v", id, err)
		}
	}
	for _, id := range []election.NodeID{1, 2, 3} {
		suspect(id)
	}
	start := h.Now()
	for {
		if l, _, ok := h.Agreed(); ok && l == 4 {
			break
		}
		if h.Now()-start > 3*hb {
			h.fatalf("no agreement on 4 within %d ticks of the crash", 3*hb)
		}
		h.run(1)
		for _, id := range refused {
			if st := h.Node(id).Status(); st.Role == election.RoleFollower && st.Leader == 5 {
				suspect(id)
			}
		}
		refused = nil
	}
	took := h.Now() - start
	t.Logf("4 agreed on %d ticks after the crash (%s)", took, h.counts())
	if took >= hb/2 {
		h.fatalf("agreement on 4 took %d ticks after the crash, want < %d (half a heartbeat interval): "+
			"a survivor sent back to the dead leader waited for a heartbeat", took, hb/2)
	}
}
