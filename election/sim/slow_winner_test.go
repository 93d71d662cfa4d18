package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// daemonBullyTimings are the bully's ticks at the daemon's default timings
// (10 ms tick, 200 ms heartbeat, 600 ms timeout, 30 ms answer timeout).
func daemonBullyTimings(c *election.Config) {
	c.HeartbeatTicks, c.LeaderTimeoutTicks, c.JitterTicks = 20, 60, 15
	c.AnswerTimeoutTicks, c.ElectionTimeoutTicks, c.HopTicks = 3, 60, 1
}

// delayCoordinators holds every Coordinator for d ticks (a winner's 127
// announcements on a loaded host, each on a new connection) and returns the
// function that delivers those due; call it after every Step.
func delayCoordinators(s *Sim, d int) func() {
	type held struct {
		at uint64
		m  election.Message
	}
	var q []held
	s.Hook = func(m election.Message) bool {
		if m.Type == election.MsgCoordinator {
			q = append(q, held{s.Now() + uint64(d), m})
			return false
		}
		return true
	}
	return func() {
		var rest []held
		for _, h := range q {
			if h.at > s.Now() {
				rest = append(rest, h)
				continue
			}
			if m := h.m; s.Up(m.To) {
				_ = s.Do(m.To, func(c election.StateMachine) error { return c.Step(m) })
			}
		}
		q = rest
	}
}

// TestSlowWinnerKeepsTheBullyLinear: the lowest of 128 nodes campaigns, every
// node above it answers and waits its turn, and the winner's Coordinators
// take 40 ticks (400 ms) to arrive. The nodes below the winner end their
// waits one tick apart and are settled one by one: a few campaigns, not
// the n(n-1)/2 Elections of the textbook bully. With the wait capped at half
// the election timeout (30 ticks, found in review), the 97 nodes below the
// cap's rank all campaigned on one tick: 8,128 Elections.
func TestSlowWinnerKeepsTheBullyLinear(t *testing.T) {
	const n = 128
	s, err := New(Options{N: n, Algorithm: "bully", Seed: 1, Tune: func(c *election.Config) {
		daemonBullyTimings(c)
		c.LeaderTimeoutTicks = 1 << 30 // no node detects anything by itself
		c.JitterTicks = 1
	}})
	if err != nil {
		t.Fatal(err)
	}
	deliver := delayCoordinators(s, 40)
	if err := s.Do(1, func(c election.StateMachine) error { c.Campaign(); return nil }); err != nil {
		t.Fatal(err)
	}
	perTick := map[uint64]int{}
	campaigned := map[election.NodeID]bool{}
	for range 400 {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		deliver()
		for id := election.NodeID(2); id <= n; id++ {
			if st := s.Node(id).Status(); st.Role == election.RoleElecting && !campaigned[id] {
				campaigned[id] = true
				perTick[s.Now()]++
			}
		}
	}
	most := 0
	for _, k := range perTick {
		most = max(most, k)
	}
	leader, _, agreed := s.Agreed()
	t.Logf("%d nodes above node 1 campaigned, at most %d on one tick; %d Elections, %d Answers, %d Coordinators; leader %d",
		len(campaigned), most, s.Counts[election.MsgElection], s.Counts[election.MsgAnswer], s.Counts[election.MsgCoordinator], leader)
	if !agreed || leader != n {
		t.Fatalf("no agreement on node %d after 400 ticks: %s", n, s.Describe())
	}
	if most > 1 {
		t.Errorf("%d nodes campaigned on one tick, want one at a time", most)
	}
	if e := s.Counts[election.MsgElection]; e > 10*n {
		t.Errorf("%d Elections, want O(n) (at most %d)", e, 10*n)
	}
}
