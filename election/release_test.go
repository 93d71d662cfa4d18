package election_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// TestReleaseAnswersTheProposalItHeldBack: a quorum-mode follower bound by
// its promise to leader 5 refuses node 4's proposal. A leader that hands
// over releases its followers and sends its TimeoutNow at once, and the
// successor's proposal may come before the release (another link): the
// release, node 5's own word, then answers that proposal at once, but only
// that node's release, and only while the proposer still waits (its
// ElectionTimeoutTicks) and is still a live member; without the release the
// proposal stays refused.
func TestReleaseAnswersTheProposalItHeldBack(t *testing.T) {
	cases := []struct {
		name    string
		from    election.NodeID // who sends the release
		wait    int             // ticks between the refusal and the release
		gone    bool            // the proposer is declared dead before the release
		wantAck bool
	}{
		{"release by the leader at once", 5, 0, false, true},
		{"release by the leader within the proposal's wait", 5, 5, false, true},
		{"release by another node", 3, 0, false, false},
		{"release after the proposer gave up", 5, 11, false, false},
		{"release after the proposer died", 5, 0, true, false},
	}
	for _, algo := range algorithms.Names() {
		for _, tc := range cases {
			t.Run(algo+"/"+tc.name, func(t *testing.T) {
				cfg := election.Config{ID: 2, Quorum: 5, LeaderTimeoutTicks: 60, HeartbeatTicks: 20,
					Peers: []election.Member{{ID: 1}, {ID: 3}, {ID: 4}, {ID: 5}}}
				sm, err := algorithms.New(algo, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t5 := election.NextTerm(0, 5)
				step := func(m election.Message) []election.Message {
					t.Helper()
					m.To = 2
					if err := sm.Step(m); err != nil {
						t.Fatalf("step %v: %v", m.Type, err)
					}
					return sm.Ready().Messages
				}
				step(election.Message{Type: election.MsgCoordinator, From: 5, Term: t5, Leader: 5, Confirmed: true, Stamp: 1})
				if st := sm.Status(); st.Role != election.RoleFollower || st.Leader != 5 {
					t.Fatalf("does not follow node 5: %+v", st)
				}
				t4 := election.NextTerm(t5, 4)
				for _, m := range step(election.Message{Type: election.MsgCoordinator, From: 4, Term: t4, Leader: 4}) {
					if m.Type == election.MsgCoordinatorAck {
						t.Fatalf("acknowledged node 4's proposal while bound to node 5: %+v", m)
					}
				}
				for range tc.wait {
					sm.Tick()
					sm.Ready()
				}
				if tc.gone {
					sm.Observe(election.Event{Type: election.EventDead, Member: election.Member{ID: 4}})
					sm.Ready()
				}
				acked := false
				for _, m := range step(election.Message{Type: election.MsgHeartbeatResp, From: tc.from, Term: t5, Release: true}) {
					if m.Type == election.MsgCoordinatorAck && m.To == 4 && m.Term == t4 {
						acked = true
					}
				}
				if acked != tc.wantAck {
					t.Fatalf("node 4's proposal acknowledged at the release: %v, want %v", acked, tc.wantAck)
				}
			})
		}
	}
}
