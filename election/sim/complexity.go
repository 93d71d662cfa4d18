package sim

import (
	"fmt"

	"github.com/electord/electord/election"
)

// ElectionCost is what one election cost on a quiet network.
type ElectionCost struct {
	Elections, Answers, Coordinators, Acks int
	// Ticks from the first Campaign until every node agrees (one message hop = one tick).
	Ticks  int
	Leader election.NodeID
}

// Total is every election message (heartbeats excluded).
func (c ElectionCost) Total() int { return c.Elections + c.Answers + c.Coordinators + c.Acks }

// MeasureElection runs the canonical case: n nodes, no leader yet, no faults,
// detection timers out of the way, and the given nodes call Campaign on the
// same tick. It counts the election messages until everyone agrees and the
// wire is quiet.
func MeasureElection(algo string, n int, quorum bool, initiators ...election.NodeID) (ElectionCost, error) {
	s, err := New(Options{N: n, Algorithm: algo, Quorum: quorum, Seed: 1, Tune: func(c *election.Config) {
		c.LeaderTimeoutTicks = 1 << 30 // no node detects anything by itself
		c.JitterTicks = 1
		c.LeaseTicks = 1<<30 - 1
	}})
	if err != nil {
		return ElectionCost{}, err
	}
	for _, id := range initiators {
		if err := s.Do(id, func(c election.StateMachine) error { c.Campaign(); return nil }); err != nil {
			return ElectionCost{}, err
		}
	}
	start := s.Now()
	bound := 4*n + 100
	agreed, err := s.RunUntil(bound, func() bool { _, _, ok := s.Agreed(); return ok })
	if err != nil {
		return ElectionCost{}, err
	}
	if !agreed {
		return ElectionCost{}, fmt.Errorf("no agreement within %d ticks: %s", bound, s.Describe())
	}
	cost := ElectionCost{Ticks: int(s.Now() - start)}
	cost.Leader, _, _ = s.Agreed()
	if _, err := s.RunUntil(bound, func() bool { return s.inFlight(election.MsgHeartbeat, election.MsgHeartbeatResp) == 0 }); err != nil {
		return cost, err
	}
	cost.Elections = s.Counts[election.MsgElection]
	cost.Answers = s.Counts[election.MsgAnswer]
	cost.Coordinators = s.Counts[election.MsgCoordinator]
	cost.Acks = s.Counts[election.MsgCoordinatorAck]
	return cost, nil
}

// inFlight counts messages on the wire, ignoring the given types.
func (s *Sim) inFlight(ignore ...election.MsgType) int {
	k := 0
	for _, bucket := range s.wire {
		for _, e := range bucket {
			skip := false
			for _, t := range ignore {
				skip = skip || e.msg.Type == t
			}
			if !skip {
				k++
			}
		}
	}
	return k
}

// Theory gives the textbook message counts for the canonical cases, in this
// implementation's terms (n live nodes, none leading):
//
//	bully, highest detects: n-1 Coordinators.
//	bully, lowest detects:  it sends Elections to the two nodes above it
//	                        that rank highest (its first wave; the others
//	                        are asked only if neither answers); both answer
//	                        and wait their rank delay (a tick for each node
//	                        above): node n campaigns at once and wins, node
//	                        n-1's one-tick wait ends as n's Coordinator is
//	                        in flight (one hop is one tick here), so it
//	                        sends one Election to n and gets one Answer:
//	                        3 Elections, 3 Answers, n-1 Coordinators: n+5
//	                        (3n-1 for n <= 3). Asking every node above at
//	                        once cost 3n-1; the textbook bully, where each
//	                        node above campaigns at once, costs n²-1.
//	ring, one initiator:    n Election hops (round trip) + n-1 Coordinators,
//	                        the initiator's to every other node at once: 2n-1.
//	ring, all initiate:     each weaker round dies after one hop (n-1), the
//	                        strongest goes round (n), n-1 Coordinators: 3n-2.
func Theory(algoCase string, n int) int {
	switch algoCase {
	case "bully/best":
		return n - 1
	case "bully/worst":
		if n <= 3 {
			return 3*n - 1
		}
		return n + 5
	case "ring/one":
		return 2*n - 1
	case "ring/all":
		return 3*n - 2
	}
	return -1
}

// Cases are the canonical cases: name → (algorithm, initiators for n).
var Cases = []struct {
	Name, Algorithm string
	Initiators      func(n int) []election.NodeID
}{
	{"bully/best", "bully", func(n int) []election.NodeID { return []election.NodeID{election.NodeID(n)} }},
	{"bully/worst", "bully", func(int) []election.NodeID { return []election.NodeID{1} }},
	{"ring/one", "ring", func(int) []election.NodeID { return []election.NodeID{1} }},
	{"ring/all", "ring", func(n int) []election.NodeID {
		ids := make([]election.NodeID, n)
		for i := range ids {
			ids[i] = election.NodeID(i + 1)
		}
		return ids
	}},
}
