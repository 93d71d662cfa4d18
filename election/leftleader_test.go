package election_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// A death verdict against a leader heard within half a timeout removes it
// from the members and keeps it followed; its leave later still ends the
// following, although it is no member any more: a named election's
// leader that withdrew has no machine left to answer, and a quiet follower
// would never time it out.
func TestLeaveOfALeaderNoLongerAMemberEndsTheFollowing(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			cfg := election.Config{ID: 1, LeaderTimeoutTicks: 60, HeartbeatTicks: 20,
				Peers: []election.Member{{ID: 2}, {ID: 3}}}
			sm, err := algorithms.New(algo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t3 := election.NextTerm(0, 3)
			if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 3, To: 1, Term: t3, Leader: 3, Confirmed: true}); err != nil {
				t.Fatal(err)
			}
			sm.Ready()
			if st := sm.Status(); st.Role != election.RoleFollower || st.Leader != 3 {
				t.Fatalf("does not follow node 3: %+v", st)
			}
			sm.Observe(election.Event{Type: election.EventDead, Member: election.Member{ID: 3}})
			if st := sm.Status(); st.Role != election.RoleFollower || st.Leader != 3 {
				t.Fatalf("a death verdict against a leader just heard ended the following: %+v", st)
			}
			sm.Observe(election.Event{Type: election.EventLeave, Member: election.Member{ID: 3}})
			if st := sm.Status(); st.Role == election.RoleFollower && st.Leader == 3 {
				t.Fatalf("still follows node 3 after it left: %+v", st)
			}
			// A leave of some other non-member changes nothing.
			sm.Observe(election.Event{Type: election.EventLeave, Member: election.Member{ID: 9}})
		})
	}
}
