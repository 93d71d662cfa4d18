package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

func TestShardsAgreement(t *testing.T) {
	names := []string{"a", "b"}
	l := func(node uint64, leads map[string]lead) nodeList { return nodeList{node: node, leads: leads} }
	same := map[string]lead{"a": {1, 5}, "b": {2, 7}}
	got, why := agreement([]nodeList{l(1, same), l(2, same)}, names)
	if why != "" || got["a"] != (lead{1, 5}) || got["b"] != (lead{2, 7}) {
		t.Fatalf("agreeing lists: %v, %q", got, why)
	}
	for _, c := range []struct {
		lists []nodeList
		want  string
	}{
		{[]nodeList{l(1, same), l(2, map[string]lead{"a": {1, 5}, "b": {2, 8}})}, "1 of 2 elections not agreed (first: b: node 1 shows 2/7, node 2 2/8)"},
		{[]nodeList{l(1, map[string]lead{"a": {0, 5}, "b": {2, 7}})}, "1 of 2 elections not agreed (first: a: node 1 shows no leader)"},
		{[]nodeList{l(1, map[string]lead{"b": {2, 7}})}, "1 of 2 elections not agreed (first: a: node 1 shows no leader)"},
		{[]nodeList{{node: 3, err: errors.New("node 3: down")}}, "node 3: down"},
		{nil, "no node answered"},
	} {
		if got, why := agreement(c.lists, names); got != nil || why != c.want {
			t.Errorf("agreement = %v, %q; want nil, %q", got, why, c.want)
		}
	}
}

func TestShardsSpreadAndMoved(t *testing.T) {
	a := map[string]lead{"x": {1, 1}, "y": {1, 1}, "z": {2, 1}}
	if got, want := spreadString(a, []uint64{1, 2, 3}), "n1:2 n2:1 n3:0 (max/min inf)"; got != want {
		t.Errorf("spreadString = %q, want %q", got, want)
	}
	if got, want := spreadString(a, []uint64{1, 2}), "n1:2 n2:1 (max/min 2.00)"; got != want {
		t.Errorf("spreadString = %q, want %q", got, want)
	}
	// A new term on the same node is no move; another node, or an election
	// only one side has, is.
	b := map[string]lead{"x": {1, 9}, "y": {3, 2}, "w": {2, 1}}
	if got := moved(a, b); got != 3 { // y moved, z missing, w new
		t.Errorf("moved = %d, want 3", got)
	}
}

func TestShardNames(t *testing.T) {
	if got := shardNames(3); !slices.Equal(got, []string{"shard-00000", "shard-00001", "shard-00002"}) {
		t.Errorf("shardNames(3) = %v", got)
	}
	if got := shardNames(100001); got[100000] != "shard-100000" || got[0] != "shard-000000" || !slices.IsSorted(got) {
		t.Errorf("shardNames(100001): %s ... %s", got[0], got[100000])
	}
}

func TestShardsMetricValue(t *testing.T) {
	text := "# HELP go_memstats_heap_inuse_bytes x\ngo_memstats_heap_inuse_bytes_total 1\ngo_memstats_heap_inuse_bytes 4.194304e+06\n"
	if v, ok := metricValue(strings.NewReader(text), "go_memstats_heap_inuse_bytes"); !ok || v != 4194304 {
		t.Errorf("metricValue = %v, %v", v, ok)
	}
	if _, ok := metricValue(strings.NewReader(text), "absent"); ok {
		t.Error("metricValue found an absent metric")
	}
}

func TestShardsLogCounts(t *testing.T) {
	log := `{"level":"warn","msg":"send queue full","peer":2}
{"level":"warn","msg":"send queue full","peer":3}
time=1 level=WARN msg="slow tick" n=4
time=1 level=WARN msg=plain n=4
2026/11/28 12:00:00 [WARN] memberlist: Refuting a suspect message (from: 4)
`
	got := logCounts(log)
	want := []string{"2× send queue full", "1× [WARN] memberlist: Refuting a suspect message (from: 4)", "1× plain", "1× slow tick"}
	if !slices.Equal(got, want) {
		t.Errorf("logCounts =\n%q\nwant\n%q", got, want)
	}
}

func TestShardsPlacementOption(t *testing.T) {
	if o, err := placementOption(""); o != nil || err != nil {
		t.Errorf("placementOption(\"\") = %v, %v; want nothing", o, err)
	}
	// Until CampaignRequest carries a placement, asking for one is an
	// error that says so; once it does, the option sets it.
	o, err := placementOption("spread")
	if err != nil {
		if !strings.Contains(err.Error(), "no placement field") {
			t.Errorf("placementOption(spread): %v", err)
		}
		return
	}
	if o == nil {
		t.Fatal("placementOption(spread): no option and no error")
	}
}

func TestShardsSummarizeSends(t *testing.T) {
	text := `# HELP electord_messages_sent_total x
electord_messages_sent_total{type="Candidacy"} 6056
electord_messages_sent_total{type="Heartbeat"} 44
electord_messages_send_failed_total{type="Answer"} 0
electord_messages_send_failed_total{type="Candidacy"} 28072
electord_messages_send_failed_total{type="Coordinator"} 3e+04
electord_messages_refused_total{type="unknown",reason="overloaded"} 12
electord_messages_refused_total{type="Election",reason="stale"} 3
electord_inbox_full_total 7
`
	want := "sent 6100 (Candidacy 6056, Heartbeat 44), failed 58072 (Candidacy 28072, Coordinator 30000), " +
		"refused 15 (overloaded 12, stale 3), inbox full 7"
	if got := summarizeSends(text); got != want {
		t.Errorf("summarizeSends = %q, want %q", got, want)
	}
}

func TestShardsLeaderless(t *testing.T) {
	lists := []nodeList{
		{node: 1, leads: map[string]lead{"a": {2, 1}, "b": {3, 1}, "c": {2, 1}}},
		{node: 2, leads: map[string]lead{"a": {2, 1}, "b": {0, 1}, "c": {5, 1}}},
	}
	// b has no leader on node 2, c is led by the dead node 5 there, d is
	// missing everywhere.
	if got := leaderless(lists, []string{"a", "b", "c", "d"}, 5); got != 3 {
		t.Errorf("leaderless = %d, want 3", got)
	}
}

func TestShardsMinMovesAndBalanced(t *testing.T) {
	leads := map[string]lead{}
	for i := range 10 {
		leads[fmt.Sprint("a", i)] = lead{id: 1}
	}
	for i := range 5 {
		leads[fmt.Sprint("b", i)] = lead{id: 2}
	}
	nodes := []uint64{1, 2, 3}
	// 15 over 3: 5 each; node 1 gives 5.
	if got := minMoves(leads, nodes); got != 5 {
		t.Errorf("minMoves = %d, want 5", got)
	}
	if balanced(leads, nodes, 0.1) {
		t.Error("node 3 leads none: balanced")
	}
	leads["a0"], leads["a1"], leads["a2"], leads["a3"], leads["a4"] = lead{id: 3}, lead{id: 3}, lead{id: 3}, lead{id: 3}, lead{id: 3}
	if !balanced(leads, nodes, 0.1) || minMoves(leads, nodes) != 0 {
		t.Errorf("5/5/5: balanced %v, minMoves %d", balanced(leads, nodes, 0.1), minMoves(leads, nodes))
	}
	// 16 over 3: 6/5/5 needs no move, 7/5/4 one.
	leads["c"] = lead{id: 1}
	if got := minMoves(leads, nodes); got != 0 {
		t.Errorf("6/5/5: minMoves %d, want 0", got)
	}
	leads["a0"] = lead{id: 1}
	if got := minMoves(leads, nodes); got != 1 {
		t.Errorf("7/5/4: minMoves %d, want 1", got)
	}
}

// A stream's leaderless time sums its gaps, a gap under way counted to the
// end; an election counts as moved when some node's stream showed another
// leader than its first, and its figure is the worst node's.
func TestShardsGapWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	li := func(id uint64) *pb.LeaderInfo { return &pb.LeaderInfo{Id: id} }
	a1 := &gapWatch{name: "a", node: 1}
	for _, e := range []struct {
		id uint64
		ms int
	}{{2, 0}, {0, 10}, {0, 12}, {3, 15}, {0, 40}, {3, 50}} {
		a1.event(li(e.id), at(e.ms))
	}
	if got := a1.total(at(100)); got != 15*time.Millisecond {
		t.Errorf("a on node 1: leaderless %v, want 15ms (5 + 10)", got)
	}
	a2 := &gapWatch{name: "a", node: 2}
	a2.event(li(2), at(0))
	a2.event(li(0), at(20)) // open until the figure is taken
	b1 := &gapWatch{name: "b", node: 1}
	b1.event(li(2), at(0))
	b1.event(li(0), at(5))
	b1.event(li(2), at(6)) // back to the same leader: not moved
	g := &gapWatches{ws: []*gapWatch{a1, a2, b1}, nodes: 2}
	f := g.figure(at(100))
	if f.watched != 2 || len(f.moved) != 1 || f.moved[0] != 80*time.Millisecond {
		t.Fatalf("figure: watched %d, moved %v; want 2 watched, a moved with 80ms (node 2's open gap)", f.watched, f.moved)
	}
	if got, want := f.String(), "1 of 2 watched moved (streams on 2 nodes), 1 of them with a gap: p50 80.0, p99 80.0, max 80.0 ms"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := g.timeline(t0), "0s: 3, 10.0"; got != want {
		t.Errorf("timeline = %q, want %q (the gaps that ended: 5, 10 and 1 ms, all in the first second)", got, want)
	}
}
