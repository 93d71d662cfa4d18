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

// TestCrashWithSlowAnnouncement: the leader of 128 bully nodes crashes, every
// follower finds out on its next heartbeat, and the highest survivor's
// Coordinators take 50 ticks (500 ms) to arrive, as its 126 announcements
// did over new connections at 128 processes. The nodes below it wait, on top
// of their tick per rank, the highest survivor's head start (a tick for each
// member, at most a leader timeout: 60 ticks here), so none campaigns
// meanwhile. With the tick per rank alone,
// the nodes just below it campaigned 10, 20, 30 ms after the crash; on the
// real host each of them that lost patience with a loaded node above won
// and announced itself (18 leaders within a second).
func TestCrashWithSlowAnnouncement(t *testing.T) {
	const n = 128
	s, err := New(Options{N: n, Algorithm: "bully", Seed: 1, Tune: daemonBullyTimings})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RunUntil(2000, func() bool { l, _, ok := s.Agreed(); return ok && l == n }); err != nil || !ok {
		t.Fatalf("no first agreement on node %d (%v): %s", n, err, s.Describe())
	}
	deliver := delayCoordinators(s, 50)
	s.Crash(n)
	campaigned := map[election.NodeID]bool{}
	elections := s.Counts[election.MsgElection]
	for range 400 {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		deliver()
		for id := election.NodeID(1); id < n-1; id++ {
			if st := s.Node(id).Status(); st.Role == election.RoleElecting || st.Role == election.RoleLeader {
				campaigned[id] = true
			}
		}
	}
	leader, _, agreed := s.Agreed()
	t.Logf("%d nodes below node %d campaigned; %d Elections after the crash; leader %d",
		len(campaigned), n-1, s.Counts[election.MsgElection]-elections, leader)
	if !agreed || leader != n-1 {
		t.Fatalf("no agreement on node %d 400 ticks after the crash: %s", n-1, s.Describe())
	}
	if len(campaigned) > 0 {
		t.Errorf("%d nodes below the highest survivor campaigned while its announcement was on its way, want none", len(campaigned))
	}
}
