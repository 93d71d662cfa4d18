package sim

import (
	"flag"
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

var reviewTrace = flag.Bool("review.trace", false, "trace the review tests' messages after the fault")

// TestSilentCrashFailoverOfBoundFollowers: in plain mode the leader's host goes away
// without refusing connections (messages to it are lost, no send failure)
// and gossip is slow to declare it dead. It reports, per algorithm, the
// ticks from the crash to the new leader's election and to the last live
// node following it: a follower bound to the dead leader holds the new
// leader's announcement until its own leader timeout.
func TestSilentCrashFailoverOfBoundFollowers(t *testing.T) {
	for _, algo := range allAlgorithms {
		var lagSum, n int
		maxLag := 0
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", algo, seed), func(t *testing.T) {
				h := newHarness(t, Options{N: 5, Algorithm: algo, Seed: seed, GossipEvery: 200})
				h.agreeOn(l1Bound(5, false), 5, "cold start")
				h.run(20)
				dead := election.NodeID(5)
				h.Hook = func(m election.Message) bool { return m.To != dead }
				h.Crash(dead)
				if *reviewTrace {
					h.Trace = func(f string, a ...any) { t.Logf(f, a...) }
				}
				crashed := h.Now()
				var first uint64
				h.until(400, "a new leader followed by every live node", func() bool {
					var leader election.NodeID
					for id := election.NodeID(1); id < dead; id++ {
						if st := h.Node(id).Status(); st.Role == election.RoleLeader && first == 0 {
							first, leader = h.Now(), id
						}
					}
					_ = leader
					l, _, ok := h.groupAgreed(1, 2, 3, 4)
					return ok && l != dead && l != 0
				})
				lag := int(h.Now() - first)
				t.Logf("elected after %d ticks, all followed %d ticks later", first-crashed, lag)
				lagSum += lag
				n++
				maxLag = max(maxLag, lag)
			})
		}
		t.Logf("%s: lag from first leader to agreement: mean %.1f max %d ticks over %d runs", algo, float64(lagSum)/float64(n), maxLag, n)
	}
}
