package history

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// term builds epoch.slot.
func term(epoch, slot uint64) uint64 { return epoch<<16 | slot }

// claim is node n answering /leader/self 200 at term t in [from, to] ms.
func claim(n int, t uint64, from, to int) Obs {
	return Obs{Node: n, Kind: Self, Sent: at(from), Recv: at(to), Code: http.StatusOK, Term: t, Self: true, State: "leader"}
}

// self is node n answering /leader/self 503.
func self(n int, t uint64, from, to int) Obs {
	return Obs{Node: n, Kind: Self, Sent: at(from), Recv: at(to), Code: http.StatusServiceUnavailable, Term: t, State: "follower"}
}

// follows is node n answering /leader with leader id at term t.
func follows(n int, id, t uint64, from, to int) Obs {
	o := Obs{Node: n, Kind: Leader, Sent: at(from), Recv: at(to), Code: http.StatusOK, ID: id, Term: t, State: "follower"}
	if id == uint64(n) {
		o.Self, o.State = true, "leader"
	}
	if id == 0 {
		o.Code, o.State = http.StatusServiceUnavailable, "no_leader"
	}
	return o
}

// topo is a topology of n nodes, all up, with the given cuts (from, to).
func topo(ms, n int, cuts ...[2]int) Topology {
	t := Topology{At: at(ms), Up: make([]bool, n+1), Cut: make([][]bool, n+1)}
	for i := range t.Cut {
		t.Cut[i] = make([]bool, n+1)
		if i > 0 {
			t.Up[i] = true
		}
	}
	for _, c := range cuts {
		t.Cut[c[0]][c[1]] = true
	}
	return t
}

// agreed3 is every node of 3 answering that node l leads at t, at ms.
func agreed3(l, t uint64, ms int) []Obs {
	var o []Obs
	for n := 1; n <= 3; n++ {
		o = append(o, follows(n, l, t, ms, ms+1))
		if uint64(n) == l {
			o = append(o, claim(n, t, ms, ms+1))
		} else {
			o = append(o, self(n, t, ms, ms+1))
		}
	}
	return o
}

func rules(r Report) map[string]int { return r.Rules() }

// only returns r's violations of rule, in order.
func only(r Report, rule string) []Violation {
	var vs []Violation
	for _, v := range r.Violations {
		if v.Rule == rule {
			vs = append(vs, v)
		}
	}
	return vs
}

func TestCleanHistoryHasNoViolation(t *testing.T) {
	h := History{Topo: []Topology{topo(0, 3)}, Heals: []Heal{{At: at(100), What: "x"}}}
	h.Obs = append(agreed3(3, term(1, 3), 0), agreed3(3, term(1, 3), 150)...)
	r := Check(Config{Nodes: 3, Quorum: 3}, h)
	if len(r.Violations) != 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
	if len(r.HealTimes) != 1 || r.HealTimes[0] != 51*time.Millisecond {
		t.Fatalf("heal times %v, want [51ms]", r.HealTimes)
	}
}

func TestTwoClaimsOverlap(t *testing.T) {
	h := History{Topo: []Topology{topo(0, 3)}, Obs: []Obs{
		claim(1, term(1, 1), 0, 10),
		claim(2, term(2, 2), 5, 6),     // overlaps node 1's interval
		claim(3, term(3, 3), 100, 101), // alone
		claim(1, term(4, 1), 102, 103), // after node 3's, newer: no overlap
	}}
	if r := Check(Config{Nodes: 3, Quorum: 3}, h); rules(r)[RuleTwoClaims] != 1 {
		t.Fatalf("want one two-claims violation, got %v", r.Violations)
	}
	if r := Check(Config{Nodes: 3}, h); rules(r)[RuleTwoClaims] != 0 {
		t.Fatalf("quorum off: want no two-claims violation, got %v", r.Violations)
	}
}

// decidedAt is o with the node's own decision window [from, to] µs after
// its Sent.
func decidedAt(o Obs, from, to int) Obs {
	o.DecidedFrom = o.Sent.Add(time.Duration(from) * time.Microsecond)
	o.DecidedTo = o.Sent.Add(time.Duration(to) * time.Microsecond)
	return o
}

func TestClaimBetweenAnothersClaims(t *testing.T) {
	// Node 1 claims term 1.1 before and after node 2 claimed 2.2; no two
	// windows overlap, but node 1's leadership was claimed throughout.
	h := History{Topo: []Topology{topo(0, 3)}, Obs: []Obs{
		claim(1, term(1, 1), 0, 1),
		claim(2, term(2, 2), 10, 11),
		claim(1, term(1, 1), 20, 21),
		claim(1, term(1, 1), 30, 31), // the same episode
	}}
	r := Check(Config{Nodes: 3, Quorum: 3}, h)
	vs := only(r, RuleTwoClaims)
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "node 1 answered /leader/self 200 at term 1.1") || !strings.Contains(vs[0].Detail, "2 times") {
		t.Fatalf("want one two-claims episode of node 2 claiming within node 1's leadership, twice, got %v", r.Violations)
	}
	if r := Check(Config{Nodes: 3}, h); rules(r)[RuleTwoClaims] != 0 || len(r.Overlaps) != 0 {
		t.Fatalf("quorum off: want no two-claims violation nor overlap, got %v, %v", r.Violations, r.Overlaps)
	}
	// Node 1 answered 503 between: its claims are two leaderships' as far
	// as polling can tell, and node 2's sits between them.
	h.Obs = append(h.Obs, self(1, term(1, 1), 15, 16))
	if r := Check(Config{Nodes: 3, Quorum: 3}, h); rules(r)[RuleTwoClaims] != 0 {
		t.Fatalf("node 1 stopped claiming between: want no two-claims violation, got %v", r.Violations)
	}
}

func TestDecidedWindowsOrderClaims(t *testing.T) {
	// The round trips overlap (node 1's answer came back late), so by
	// [Sent, Recv] the claims may have been at one instant. The nodes'
	// own windows say node 1 decided first: no violation in quorum mode.
	// Plain mode judges by round trips, as before: an overlap.
	before := History{Topo: []Topology{topo(0, 3)}, Obs: []Obs{
		decidedAt(claim(1, term(1, 1), 0, 10), 100, 102),
		decidedAt(claim(2, term(2, 2), 5, 6), 200, 201),
	}}
	if r := Check(Config{Nodes: 3, Quorum: 3}, before); rules(r)[RuleTwoClaims] != 0 || r.Resolved != 1 {
		t.Fatalf("older claim decided first: want no two-claims violation and one resolved overlap, got %v, %d resolved", r.Violations, r.Resolved)
	}
	if r := Check(Config{Nodes: 3}, before); len(r.Overlaps) != 1 {
		t.Fatalf("quorum off: want the round trips' overlap, got %v", r.Overlaps)
	}
	// Node 2's claim decided between two of node 1's leadership (the
	// round trips of all three overlap).
	after := History{Topo: []Topology{topo(0, 3)}, Obs: []Obs{
		decidedAt(claim(1, term(1, 1), 0, 1), 500, 501),
		decidedAt(claim(1, term(1, 1), 3, 10), 4000, 4002),
		decidedAt(claim(2, term(2, 2), 5, 6), 200, 201),
	}}
	if r := Check(Config{Nodes: 3, Quorum: 3}, after); rules(r)[RuleTwoClaims] != 1 {
		t.Fatalf("node 2's claim decided between two of node 1's: want one two-claims violation, got %v", r.Violations)
	}
	// Windows that overlap count as one instant, whatever the terms.
	same := History{Topo: []Topology{topo(0, 3)}, Obs: []Obs{
		decidedAt(claim(1, term(3, 1), 0, 10), 5200, 5205),
		decidedAt(claim(2, term(2, 2), 5, 6), 204, 206),
	}}
	if r := Check(Config{Nodes: 3, Quorum: 3}, same); rules(r)[RuleTwoClaims] != 1 {
		t.Fatalf("overlapping decision windows: want one two-claims violation, got %v", r.Violations)
	}
}

func TestMinorityClaimAfterGrace(t *testing.T) {
	// Node 1 is cut from 2 and 3 at 1000 ms: alone, it has no majority of 3.
	cuts := [][2]int{{1, 2}, {2, 1}, {1, 3}, {3, 1}}
	h := History{Topo: []Topology{topo(0, 3), topo(1000, 3, cuts...)}, Obs: []Obs{
		claim(1, term(1, 1), 1200, 1201),      // within the grace: allowed
		claim(1, term(1, 1), 2500, 2501),      // after: violation
		follows(1, 1, term(1, 1), 2600, 2601), // same stretch: reported once
		follows(2, 3, term(2, 3), 2500, 2501), // the majority side: fine
	}}
	r := Check(Config{Nodes: 3, Quorum: 3, Grace: time.Second}, h)
	if rules(r)[RuleMinorityClaim] != 1 || len(r.Violations) != 1 {
		t.Fatalf("want one minority-claim violation, got %v", r.Violations)
	}
}

func TestMinorityLeaderOneWayCut(t *testing.T) {
	// A one-way cut 2 -> 1 also leaves node 1 without node 2 (acks need
	// both ways); with 3 cut both ways too, node 1 is alone.
	h := History{Topo: []Topology{topo(0, 3, [2]int{2, 1}, [2]int{1, 3}, [2]int{3, 1})}, Obs: []Obs{
		follows(1, 2, term(1, 2), 1500, 1501),
	}}
	r := Check(Config{Nodes: 3, Quorum: 3, Grace: time.Second}, h)
	if rules(r)[RuleMinorityLeader] != 1 {
		t.Fatalf("want a minority-leader violation, got %v", r.Violations)
	}
}

func TestBridgeFollowerOfMajorityLeader(t *testing.T) {
	// A bridge [1] | [2 3 4], both with 5: node 1 reaches only 5, which
	// leads and reaches all. Node 1 naming 5 is right; naming 2 is not.
	var cuts [][2]int
	for _, o := range []int{2, 3, 4} {
		cuts = append(cuts, [2]int{1, o}, [2]int{o, 1})
	}
	h := History{Topo: []Topology{topo(0, 5, cuts...)}, Obs: []Obs{
		follows(1, 5, term(7, 5), 2500, 2501),
		follows(1, 2, term(8, 2), 2600, 2601),
	}}
	r := Check(Config{Nodes: 5, Quorum: 5, Grace: time.Second}, h)
	if rules(r)[RuleMinorityLeader] != 1 || !strings.Contains(r.Violations[0].Detail, "names node 2") {
		t.Fatalf("want one minority-leader violation (naming node 2), got %v", r.Violations)
	}
}

func TestTermMonotonic(t *testing.T) {
	h := History{Obs: []Obs{
		follows(1, 2, term(5, 2), 0, 1),
		follows(1, 0, term(0, 0), 10, 11), // restart: term 0
		follows(1, 0, term(0, 0), 20, 21), // same drop: one violation
		follows(1, 2, term(5, 2), 30, 31),
		follows(1, 2, term(4, 2), 40, 41), // a second drop
	}}
	r := Check(Config{Nodes: 2}, h)
	if rules(r)[RuleTermMonotonic] != 2 {
		t.Fatalf("want two term-monotonic violations, got %v", r.Violations)
	}
}

func TestOneLeaderPerTerm(t *testing.T) {
	h := History{Obs: []Obs{
		follows(1, 2, term(5, 2), 0, 1),
		follows(3, 3, term(5, 2), 0, 1), // node 3 cannot own 5.2, and 5.2 is node 2's
	}}
	r := Check(Config{Nodes: 3}, h)
	if rules(r)[RuleOneLeaderPerTerm] != 2 {
		t.Fatalf("want two one-leader-per-term violations, got %v", r.Violations)
	}
}

func TestHealWithoutAgreement(t *testing.T) {
	h := History{Topo: []Topology{topo(0, 3)}, Heals: []Heal{{At: at(0), What: "partition"}}, Obs: []Obs{
		follows(1, 1, term(1, 1), 10, 11), claim(1, term(1, 1), 10, 11),
		follows(2, 3, term(1, 3), 10, 11), self(2, term(1, 3), 10, 11),
		follows(3, 3, term(1, 3), 10, 11), claim(3, term(1, 3), 10, 11),
	}}
	r := Check(Config{Nodes: 3}, h)
	if r.Unhealed != 1 || rules(r)[RuleHealAgreement] != 1 {
		t.Fatalf("want one unhealed heal, got %+v", r)
	}
	if !strings.Contains(r.Violations[0].Detail, "1: node 1") {
		t.Fatalf("the detail should name each node's last view: %s", r.Violations[0].Detail)
	}
}

func TestSlowHeal(t *testing.T) {
	h := History{Topo: []Topology{topo(0, 3)}, Heals: []Heal{{At: at(0), What: "partition"}}, Obs: agreed3(2, term(1, 2), 6000)}
	r := Check(Config{Nodes: 3, AgreeMax: 5 * time.Second}, h)
	if rules(r)[RuleHealAgreement] != 1 || len(r.HealTimes) != 1 {
		t.Fatalf("want a slow heal, got %+v", r)
	}
}

func TestFollowerFaultChangesLeader(t *testing.T) {
	h := History{Topo: []Topology{topo(0, 3)}, Calms: []Calm{{From: at(0), To: at(100), Leader: 3, Term: term(1, 3), Affected: []int{1}, What: "kill"}}}
	h.Obs = append(h.Obs, follows(2, 0, term(1, 3), 50, 51)) // node 2 lost the leader
	h.Obs = append(h.Obs, agreed3(2, term(2, 2), 200)...)    // and another leads after
	r := Check(Config{Nodes: 3}, h)
	if rules(r)[RuleCalm] != 2 {
		t.Fatalf("want two follower-fault violations, got %v", r.Violations)
	}
	if r.Calms != 1 || r.LeaderChanges != 1 {
		t.Fatalf("want 1 follower fault and 1 leader change counted, got %d and %d", r.Calms, r.LeaderChanges)
	}
}

// blip is the history of a plain-mode blip in 5 nodes: leader 5 at term
// 3.5; a follower fault of affected from 1000 to 3000 ms, during which the
// affected nodes elect node affected[0] at term 9; after the heal at 3000,
// every node agrees on after at term afterTerm from 3100 on.
func blip(affected []int, after, afterTerm uint64) History {
	var cuts [][2]int
	for _, a := range affected {
		for o := 1; o <= 5; o++ {
			if !slices.Contains(affected, o) {
				cuts = append(cuts, [2]int{a, o}, [2]int{o, a})
			}
		}
	}
	h := History{
		Topo:  []Topology{topo(0, 5), topo(1000, 5, cuts...), topo(3000, 5)},
		Heals: []Heal{{At: at(3000), What: "partition", Kind: "partition"}},
		Calms: []Calm{{From: at(1000), To: at(3000), Leader: 5, Term: term(3, 5), Affected: affected, What: "partition"}},
	}
	for ms := 0; ms < 3000; ms += 100 {
		for n := 1; n <= 5; n++ {
			switch {
			case ms >= 1000 && slices.Contains(affected, n):
				// the cut-off side elects its own leader, higher
				own := uint64(affected[0])
				h.Obs = append(h.Obs, follows(n, own, term(9, own), ms, ms+1))
				if uint64(n) == own {
					h.Obs = append(h.Obs, claim(n, term(9, own), ms, ms+1))
				}
			case n == 5:
				h.Obs = append(h.Obs, follows(n, 5, term(3, 5), ms, ms+1), claim(n, term(3, 5), ms, ms+1))
			default:
				h.Obs = append(h.Obs, follows(n, 5, term(3, 5), ms, ms+1), self(n, term(3, 5), ms, ms+1))
			}
		}
	}
	for n := 1; n <= 5; n++ {
		h.Obs = append(h.Obs, follows(n, after, afterTerm, 3100, 3101))
		if uint64(n) == after {
			h.Obs = append(h.Obs, claim(n, afterTerm, 3100, 3101))
		} else {
			h.Obs = append(h.Obs, self(n, afterTerm, 3100, 3101))
		}
	}
	return h
}

func TestPlainBlipMayRaiseTheTermNotMoveTheLeader(t *testing.T) {
	// Leader 5 reasserts above the minority's 9.1: fine without quorum,
	// with quorum the term had to stay 3.5.
	h := blip([]int{1, 2}, 5, term(10, 5))
	if r := Check(Config{Nodes: 5}, h); len(r.Violations) != 0 || r.LeaderChanges != 0 || r.Calms != 1 {
		t.Fatalf("plain: leader 5 kept at a higher term: want no violation and no leader change, got %v (%d changes)", r.Violations, r.LeaderChanges)
	}
	// (With quorum the minority's own leader breaks the minority rules
	// too; only the follower-fault rule is the point here.)
	r := Check(Config{Nodes: 5, Quorum: 5}, h)
	calm := only(r, RuleCalm)
	if len(calm) != 1 || r.LeaderChanges != 0 || !strings.Contains(calm[0].Detail, "node 5 at term 10.5, was node 5 at term 3.5") {
		t.Fatalf("quorum: want one follower-fault violation for the new term (same leader), got %v (%d changes)", calm, r.LeaderChanges)
	}
}

func TestPlainBlipThatMovesTheLeaderIsReported(t *testing.T) {
	// The isolated follower 2 elected itself at 9.2 and leads everyone
	// after the heal: the blip moved the leader.
	r := Check(Config{Nodes: 5}, blip([]int{2}, 2, term(9, 2)))
	if rules(r)[RuleCalm] != 1 || len(r.Violations) != 1 || r.LeaderChanges != 1 {
		t.Fatalf("want one follower-fault violation and one leader change, got %v (%d changes)", r.Violations, r.LeaderChanges)
	}
	if !strings.Contains(r.Violations[0].Detail, "the agreed leader is node 2 at term 9.2, was node 5 at term 3.5") {
		t.Fatalf("the detail should name both leaders: %s", r.Violations[0].Detail)
	}
}

func TestPlainFollowerFaultLeaderLostDuringTheFault(t *testing.T) {
	// Node 3, on the larger side, names the minority's leader during the
	// fault; node 4 names no leader. Both are violations, the minority's
	// own answers are not.
	h := blip([]int{1, 2}, 5, term(10, 5))
	h.Obs = append(h.Obs, follows(3, 1, term(9, 1), 2000, 2001), follows(4, 0, term(3, 5), 2000, 2001))
	calm := only(Check(Config{Nodes: 5}, h), RuleCalm)
	if len(calm) != 2 {
		t.Fatalf("want two follower-fault violations (nodes 3 and 4), got %v", calm)
	}
	for i, n := range []string{"node 3 answered /leader 200: leader 1", "node 4 answered /leader 503"} {
		if !strings.Contains(calm[i].Detail, n) {
			t.Fatalf("violation %d should say %q: %s", i, n, calm[i].Detail)
		}
	}
}

func TestHealFiguresByKind(t *testing.T) {
	h := History{Topo: []Topology{topo(0, 3)}, Heals: []Heal{
		{At: at(0), What: "one-way", Kind: "one-way"},
		{At: at(1000), What: "rolling-restart of node 3", Kind: "rolling-restart"},
		{At: at(2000), What: "isolate-leader"},
	}}
	h.Obs = append(h.Obs, agreed3(3, term(1, 3), 300)...)
	h.Obs = append(h.Obs, agreed3(3, term(1, 3), 1100)...)
	r := Check(Config{Nodes: 3}, h)
	want := map[string][]time.Duration{"one-way": {301 * time.Millisecond}, "rolling-restart": {101 * time.Millisecond}, "isolate-leader": nil}
	if len(r.ByKind) != len(want) {
		t.Fatalf("kinds %v, want %v", r.ByKind, want)
	}
	for k, ds := range want {
		kh := r.ByKind[k]
		if kh == nil || kh.Heals != 1 || !slices.Equal(kh.Times, ds) || kh.Unhealed != 1-len(ds) {
			t.Fatalf("%s: got %+v, want times %v", k, kh, ds)
		}
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if Percentile(ds, .5) != 3 || Percentile(ds, 1) != 5 || Percentile(nil, .5) != 0 {
		t.Fatal("percentile")
	}
}
