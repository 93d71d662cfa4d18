package node

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// withElections is a node whose published named elections are n made-up
// ones, e00000 to e<n-1>, every third led by this node with two local apps.
func withElections(n int) *Node {
	nd := &Node{elections: map[string]ElectionInfo{}, counters: &Counters{}}
	for i := range n {
		name := fmt.Sprintf("e%05d", i)
		e := ElectionInfo{Election: name, Candidates: 3, Leader: LeaderInfo{Election: name, ID: 2, Term: election.Term(i + 1)}}
		if i%3 == 0 {
			e.Leader.ID, e.Leader.Self, e.Local = 1, true, 2
		}
		nd.elections[name] = e
	}
	return nd
}

func TestNamedElectionsPageAndCounts(t *testing.T) {
	nd := withElections(250)
	page, total := nd.NamedElectionsPage("", 100)
	if total != 250 || len(page) != 100 || page[0].Election != "e00000" || page[99].Election != "e00099" {
		t.Fatalf("first page: %d of %d, %s..%s", len(page), total, page[0].Election, page[len(page)-1].Election)
	}
	page, _ = nd.NamedElectionsPage("e00199", 100)
	if len(page) != 50 || page[0].Election != "e00200" {
		t.Fatalf("last page: %d from %s", len(page), page[0].Election)
	}
	if page, _ := nd.NamedElectionsPage("", 0); len(page) != 0 {
		t.Fatalf("limit 0: %d rows", len(page))
	}
	if c := nd.NamedCounts(); c.Elections != 250 || c.Led != 84 || c.Candidacies != 168 {
		t.Fatalf("counts %+v", c)
	}
	// A change is a new leader or token, or the leader gone; an election
	// that had none and has none is no change.
	for _, tc := range []struct {
		old, new LeaderInfo
		change   bool
	}{
		{LeaderInfo{}, LeaderInfo{ID: 1, Term: 5}, true},
		{LeaderInfo{ID: 1, Term: 5}, LeaderInfo{ID: 1, Term: 5}, false},
		{LeaderInfo{ID: 1, Term: 5}, LeaderInfo{ID: 1, Term: 6}, true},
		{LeaderInfo{ID: 1, Term: 5}, LeaderInfo{Term: 5}, true},
		{LeaderInfo{Term: 5}, LeaderInfo{}, false},
	} {
		before := nd.counters.NamedLeaderChanges.Load()
		nd.noteNamedLeader(tc.old, tc.new)
		if got := nd.counters.NamedLeaderChanges.Load() - before; got != map[bool]uint64{true: 1}[tc.change] {
			t.Errorf("%+v -> %+v: counted %d", tc.old, tc.new, got)
		}
	}
}

// What the status page (a page of 100) and a scrape (the counts) cost with
// 10,000 named elections.
func BenchmarkNamedElectionsPage10k(b *testing.B) {
	nd := withElections(10000)
	for b.Loop() {
		nd.NamedElectionsPage("", 100)
	}
}

func BenchmarkNamedCounts10k(b *testing.B) {
	nd := withElections(10000)
	for b.Loop() {
		nd.NamedCounts()
	}
}
