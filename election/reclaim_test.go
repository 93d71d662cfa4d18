package election_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// TestQuorumNeverProposesAnOldOwnTerm: in quorum mode a machine started
// from term S (a named election's new machine, from the store's floor) is
// told by another node that it leads at a term T it owns, T below S: a
// follower still bound to the leadership this node held for an app that
// has since withdrawn. It must not propose T: T was minted before it ran,
// and the followers bound to that leadership would acknowledge it, so a
// new app would lead with the fencing token of the app before it. A term
// above S, new to this run, is proposed as before.
func TestQuorumNeverProposesAnOldOwnTerm(t *testing.T) {
	const self = 4
	old := election.NextTerm(election.NextTerm(0, 1), self) // 2.4: led for the earlier app
	start := election.NextTerm(old, 5)                      // 3.5: the floor, from another election
	for _, algo := range algorithms.Names() {
		t.Run(algo, func(t *testing.T) {
			cfg := election.Config{ID: self, Quorum: 5, Term: start,
				Peers: []election.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 5}}}
			sm, err := algorithms.New(algo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Past the restart's hold, so that a proposal could go out.
			for range cfg.Defaults().PromiseTicks() + 1 {
				sm.Tick()
			}
			sm.Ready()
			proposes := func(term election.Term) bool {
				t.Helper()
				if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 1, To: self, Term: term, Leader: self, Confirmed: true}); err != nil {
					t.Fatalf("the announcement at %v refused as malformed: %v", term, err)
				}
				for _, m := range sm.Ready().Messages {
					if m.Type == election.MsgCoordinator && m.Leader == self && !m.Confirmed && m.Term == term {
						return true
					}
				}
				return false
			}
			if proposes(old) {
				t.Fatalf("told it leads %v (below the term %v it started from), it proposed %v", old, start, old)
			}
			if st := sm.Status(); st.Role == election.RoleLeader && st.LeaderTerm == old {
				t.Fatalf("leads at %v", old)
			}
			if next := election.NextTerm(sm.Status().Term, self); !proposes(next) {
				t.Fatalf("told it leads %v (above the term it started from), it did not propose", next)
			}
		})
	}
}
