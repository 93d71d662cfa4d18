package sim

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestColdStartWithSlowAnnouncement: 128 bully nodes start together and the
// highest one's Coordinators take 80 ticks (800 ms) to arrive, as its 127
// announcements did over new connections on a loaded host. The nodes below
// it leave it two leader timeouts before they campaign, so its announcement
// settles them and the first election costs one campaign. With a tick per
// rank only, node 127 campaigned on the next tick, then every node in turn,
// each sending an Election to every node above it (counted here) while the
// announcement was on its way.
func TestColdStartWithSlowAnnouncement(t *testing.T) {
	const n = 128
	s, err := New(Options{N: n, Algorithm: "bully", Seed: 1, Tune: daemonBullyTimings})
	if err != nil {
		t.Fatal(err)
	}
	deliver := delayCoordinators(s, 80)
	campaigned := map[election.NodeID]bool{}
	for range 400 {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		deliver()
		for id := election.NodeID(1); id < n; id++ {
			if st := s.Node(id).Status(); st.Role == election.RoleElecting {
				campaigned[id] = true
			}
		}
	}
	leader, _, agreed := s.Agreed()
	t.Logf("%d nodes below node %d campaigned; %d Elections, %d Answers, %d Coordinators; leader %d",
		len(campaigned), n, s.Counts[election.MsgElection], s.Counts[election.MsgAnswer], s.Counts[election.MsgCoordinator], leader)
	if !agreed || leader != n {
		t.Fatalf("no agreement on node %d after 400 ticks: %s", n, s.Describe())
	}
	if len(campaigned) > 0 {
		t.Errorf("%d nodes below the highest campaigned while its announcement was on its way, want none", len(campaigned))
	}
}
