package status

import (
	"testing"

	"github.com/electord/electord/election"
)

func row(id, sees election.NodeID, term election.Term) Member {
	return Member{ID: id, Answered: true, SeesID: sees, SeesTerm: termView(term)}
}

// TestMarkFlagsTheMinority: members naming another leader or term than
// most do are flagged; a tie goes to the serving node's own view; members
// that did not answer are never flagged.
func TestMarkFlagsTheMinority(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     []Member
		self     election.NodeID
		disagree bool
		differs  []election.NodeID
	}{
		{"all agree", []Member{row(1, 3, 5), row(2, 3, 5), row(3, 3, 5)}, 1, false, nil},
		{"one names itself", []Member{row(1, 3, 5), row(2, 2, 9), row(3, 3, 5)}, 1, true, []election.NodeID{2}},
		{"same leader, older term", []Member{row(1, 3, 7), row(2, 3, 5), row(3, 3, 7)}, 1, true, []election.NodeID{2}},
		{"serving node in the minority", []Member{row(1, 0, 5), row(2, 3, 5), row(3, 3, 5)}, 1, true, []election.NodeID{1}},
		{"tie goes to the serving node", []Member{row(1, 2, 9), row(2, 2, 9), row(3, 3, 5), row(4, 3, 5)}, 1, true, []election.NodeID{3, 4}},
		{"silent members are not flagged", []Member{row(1, 3, 5), {ID: 2, Liveness: "suspect"}, row(3, 3, 5)}, 1, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disagree, majority := mark(tc.rows, tc.self)
			if disagree != tc.disagree || majority == "" {
				t.Fatalf("disagree = %v (majority %q), want %v", disagree, majority, tc.disagree)
			}
			var got []election.NodeID
			for _, r := range tc.rows {
				if r.Differs {
					got = append(got, r.ID)
				}
			}
			if len(got) != len(tc.differs) {
				t.Fatalf("flagged %v, want %v", got, tc.differs)
			}
			for i := range got {
				if got[i] != tc.differs[i] {
					t.Fatalf("flagged %v, want %v", got, tc.differs)
				}
			}
		})
	}
}
