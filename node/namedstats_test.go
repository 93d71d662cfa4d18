package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// withElections is a node whose published named elections are n made-up
// ones, e00000 to e<n-1>, every third led by this node with two local apps.
func withElections(n int) *Node {
	nd := &Node{elections: map[string]ElectionInfo{}, counters: &Counters{}}
	for i := range n {
		name := fmt.Sprintf("e%05d", i)
		e := ElectionInfo{Election: name, Candidates: 3, CandidateIDs: []election.NodeID{1, 2, 3},
			Leader: LeaderInfo{Election: name, ID: 2, Term: election.Term(i + 1)}}
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

func BenchmarkNamedByNode10k(b *testing.B) {
	nd := withElections(10000)
	for b.Loop() {
		nd.NamedByNode()
	}
}

func BenchmarkNamedListLeaderFiltered10k(b *testing.B) {
	nd := withElections(10000)
	for b.Loop() {
		nd.ListElections(ElectionQuery{Leader: 1, Prefix: "e0"})
	}
}

func BenchmarkNamedCounts10k(b *testing.B) {
	nd := withElections(10000)
	for b.Loop() {
		nd.NamedCounts()
	}
}

// A listing filters by prefix, leader or no leader, pages by name with the
// next page's After, counts what matched on every page, and refuses a bad
// query naming the field.
func TestListElectionsFiltersAndPages(t *testing.T) {
	nd := withElections(250) // every third led by node 1, the rest by node 2
	for i := 240; i < 250; i++ {
		e := nd.elections[fmt.Sprintf("e%05d", i)]
		e.Leader = LeaderInfo{Election: e.Election, State: StateNoLeader}
		nd.elections[e.Election] = e
	}
	p, err := nd.ListElections(ElectionQuery{})
	if err != nil || len(p.Elections) != named.PageDefault || p.Matched != 250 || p.Total != 250 || p.Next != "e00099" {
		t.Fatalf("default: %d rows, matched %d of %d, next %q, %v", len(p.Elections), p.Matched, p.Total, p.Next, err)
	}
	var all []string
	q := ElectionQuery{Leader: 1, Limit: 30}
	for pages := 0; ; pages++ {
		p, err := nd.ListElections(q)
		if err != nil || p.Matched != 80 || pages > 3 {
			t.Fatalf("leader 1, page %d: matched %d, %v", pages, p.Matched, err)
		}
		for _, e := range p.Elections {
			if e.Leader.ID != 1 {
				t.Fatalf("%s led by %d in a listing of node 1's", e.Election, e.Leader.ID)
			}
			all = append(all, e.Election)
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	// e00000, e00003, ..., e00237: 80 of them (e00240 on lead none).
	if len(all) != 80 || all[0] != "e00000" || all[79] != "e00237" || !slices.IsSorted(all) {
		t.Fatalf("node 1's by pages: %d, %v...%v", len(all), all[0], all[len(all)-1])
	}
	p, _ = nd.ListElections(ElectionQuery{Leaderless: true})
	if p.Matched != 10 || len(p.Elections) != 10 || p.Next != "" || p.Elections[0].Election != "e00240" {
		t.Fatalf("leaderless: %+v", p)
	}
	p, _ = nd.ListElections(ElectionQuery{Prefix: "e001", Limit: 1000})
	if p.Matched != 100 || len(p.Elections) != 100 || p.Elections[0].Election != "e00100" || p.Next != "" {
		t.Fatalf("prefix e001: matched %d, %d rows", p.Matched, len(p.Elections))
	}
	for _, tc := range []struct {
		q    ElectionQuery
		want string
	}{
		{ElectionQuery{Limit: named.PageMax + 1}, "limit: 1001 is not within 1 to 1000"},
		{ElectionQuery{Limit: -1}, "limit: -1"},
		{ElectionQuery{After: "a/b"}, "after: "},
		{ElectionQuery{Prefix: "x y"}, "prefix: "},
		{ElectionQuery{Leader: 2, Leaderless: true}, "leader and leaderless"},
	} {
		if _, err := nd.ListElections(tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.q, err, tc.want)
		}
	}
}

// The tallies per node count leaderships and candidacies from the
// published elections.
func TestNamedByNode(t *testing.T) {
	nd := withElections(9)
	for name, e := range nd.elections {
		e.CandidateIDs = []election.NodeID{1, 2, 3}
		if e.Leader.ID == 2 {
			e.CandidateIDs = []election.NodeID{2, 3}
		}
		nd.elections[name] = e
	}
	got := fmt.Sprint(nd.NamedByNode())
	if want := "[{1 3 3} {2 6 9} {3 0 9}]"; got != want {
		t.Fatalf("tallies %s, want %s", got, want)
	}
}

type failovers struct {
	Observer
	d []time.Duration
}

func (f *failovers) NamedFailover(d time.Duration) { f.d = append(f.d, d) }

// A failover is timed from when the node stopped showing a leader to when
// it shows the next; a first leader is no failover, a straight change is
// one of 0.
func TestNamedFailoverTimed(t *testing.T) {
	nd := &Node{counters: &Counters{}}
	f := &failovers{}
	nd.SetObserver(f)
	var e ElectionInfo // not known yet
	step := func(li LeaderInfo) {
		next := ElectionInfo{Election: "x", Leader: li}
		nd.noteNamed(e, &next, true)
		e = next
	}
	step(LeaderInfo{})                // known, electing
	step(LeaderInfo{ID: 1, Term: 10}) // first leader: no failover
	step(LeaderInfo{ID: 1, Term: 10}) // nothing changed
	step(LeaderInfo{})                // lost
	e.leaderless = e.leaderless.Add(-40 * time.Millisecond)
	step(LeaderInfo{})                // still none: the time carries
	step(LeaderInfo{ID: 2, Term: 11}) // the next: 40 ms or more
	step(LeaderInfo{ID: 3, Term: 12}) // straight to another: 0
	step(LeaderInfo{})                // lost sight of it
	step(LeaderInfo{ID: 3, Term: 12}) // the same leadership again: none
	if len(f.d) != 2 || f.d[0] < 40*time.Millisecond || f.d[0] > time.Second || f.d[1] != 0 {
		t.Fatalf("failovers %v, want [>=40ms 0]", f.d)
	}
	if got := nd.counters.NamedLeaderChanges.Load(); got != 6 {
		t.Fatalf("leader changes %d, want 6", got)
	}
}
