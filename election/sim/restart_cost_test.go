package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/electord/electord/election"
)

// TestQuorumRestartCost measures, at the daemon's quorum timings (10 ms
// ticks: heartbeat 10, timeout 60, lease 45, promise 58), what a restart
// costs in quorum mode, where a node that starts with a persisted term
// acknowledges no proposal and proposes nothing for PromiseTicks:
//
//   - follower restart: a follower crashes and restarts at once; ticks
//     until it follows the leader again (the leader and its term must not
//     move);
//   - leader crash: the leader crashes and stays down; ticks until the
//     others agree on a new leader (no restart involved: the baseline);
//   - leader and follower crash: both at once, the follower restarts at
//     once and is needed for a majority (n=3); ticks until agreement;
//   - cluster restart: every node crashes and restarts at once; ticks
//     until agreement.
//
// Each case runs 20 seeds per algorithm and logs min/p50/max; it fails only
// when a case does not settle within its bound (3·L1 at these timings).
// docs/ALGORITHMS.md ("Quorum mode") records the figures.
func TestQuorumRestartCost(t *testing.T) {
	const seeds = 20
	for _, algo := range allAlgorithms {
		for _, c := range restartCostCases {
			var took []int
			for seed := uint64(1); seed <= seeds; seed++ {
				took = append(took, restartCost(t, algo, seed, c))
			}
			slices.Sort(took)
			t.Logf("%-5s n=%d %-26s ticks: min %d p50 %d max %d", algo, c.n, c.name, took[0], took[len(took)/2], took[len(took)-1])
		}
	}
}

type restartCostCase struct {
	name string
	n    int
	// crash lists whom to crash, by role: "leader", or a follower's index
	// among the followers (0, 1, ...); restart says which of them restart
	// at once.
	crash, restart []string
	// sameLeader: the leader and its term must stay (only a follower
	// restarted).
	sameLeader bool
}

var restartCostCases = []restartCostCase{
	{name: "follower restart", n: 3, crash: []string{"0"}, restart: []string{"0"}, sameLeader: true},
	{name: "follower restart", n: 5, crash: []string{"0"}, restart: []string{"0"}, sameLeader: true},
	{name: "leader crash", n: 3, crash: []string{"leader"}},
	{name: "leader crash", n: 5, crash: []string{"leader"}},
	{name: "leader+follower crash", n: 3, crash: []string{"leader", "0"}, restart: []string{"0"}},
	{name: "cluster restart", n: 3, crash: []string{"leader", "0", "1"}, restart: []string{"leader", "0", "1"}},
	{name: "cluster restart", n: 5, crash: []string{"leader", "0", "1", "2", "3"}, restart: []string{"leader", "0", "1", "2", "3"}},
}

// restartCost plays case c once and returns the ticks from the fault to the
// outcome the case waits for.
func restartCost(t *testing.T, algo string, seed uint64, c restartCostCase) int {
	t.Helper()
	h := newHarness(t, Options{N: c.n, Algorithm: algo, Quorum: true, Seed: seed, Tune: daemonQuorumTimings})
	bound := 3 * 6 * l1Bound(c.n, true) // the daemon's timings are six times the defaults
	leader, term := h.agree(bound, "cold start")
	h.run(100 + int(seed)) // every follower's promise renewed, at a seed-dependent phase
	var followers []election.NodeID
	for i := 1; i <= c.n; i++ {
		if id := election.NodeID(i); id != leader {
			followers = append(followers, id)
		}
	}
	node := func(role string) election.NodeID {
		if role == "leader" {
			return leader
		}
		var i int
		fmt.Sscan(role, &i)
		return followers[i]
	}
	for _, r := range c.crash {
		h.Crash(node(r))
	}
	for _, r := range c.restart {
		if err := h.Restart(node(r)); err != nil {
			h.fatalf("restart: %v", err)
		}
	}
	start := h.Now()
	if c.sameLeader {
		f := node(c.restart[0])
		h.until(bound, fmt.Sprintf("%s: node %d following %d again", c.name, f, leader), func() bool {
			st := h.Node(f).Status()
			return st.Role == election.RoleFollower && st.Leader == leader && st.LeaderTerm == term
		})
		if l, tm, ok := h.Agreed(); !ok || l != leader || tm != term {
			h.fatalf("%s: leader %d at %v moved to %d at %v (agreed %v)", c.name, leader, term, l, tm, ok)
		}
	} else {
		h.agree(bound, c.name)
	}
	return int(h.Now() - start)
}
