package named

import (
	"fmt"
	"math"
	"testing"

	"github.com/electord/electord/election"
)

// The hash is a wire contract: every node must rank every candidate alike,
// across versions. These values were computed once; a change to SpreadHash
// that moves any of them is a new placement, not a fix.
func TestSpreadHashIsFixed(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   election.NodeID
		want uint32
	}{
		{"", 1, 0xb5d1f074}, {"", 2, 0x659dfb2a}, {"", 3, 0x70c497a6},
		{"shard-0", 1, 0x5c1c13fc}, {"shard-0", 2, 0x5597c299}, {"shard-0", 3, 0x84734d3f},
		{"jobs", 1, 0x97ca50cf}, {"jobs", 2, 0x32c4ec44}, {"jobs", 3, 0x275dcd2a},
	} {
		if got := SpreadHash(tc.name, tc.id); got != tc.want {
			t.Errorf("SpreadHash(%q, %d) = %#x, want %#x", tc.name, tc.id, got, tc.want)
		}
	}
}

// The hash spreads: over 10,000 elections and 5 nodes, each node is the
// top-ranked one of its fifth within 5%; and when one node is removed,
// only its elections change their top-ranked node.
func TestSpreadHashSpreads(t *testing.T) {
	const elections, nodes = 10000, 5
	top := func(name string, skip election.NodeID) election.NodeID {
		var best election.NodeID
		var w uint32
		for id := election.NodeID(1); id <= nodes; id++ {
			if h := SpreadHash(name, id); id != skip && (best == 0 || h > w) {
				best, w = id, h
			}
		}
		return best
	}
	counts := map[election.NodeID]int{}
	for i := range elections {
		name := fmt.Sprintf("shard-%d", i)
		first := top(name, 0)
		counts[first]++
		if again := top(name, 3); first != 3 && again != first {
			t.Fatalf("%s: top-ranked node %d became %d when node 3 left", name, first, again)
		}
	}
	for id, k := range counts {
		if math.Abs(float64(k)-elections/nodes) > 0.05*elections/nodes {
			t.Errorf("node %d is top-ranked in %d of %d elections, want %d within 5%%: %v", id, k, elections, elections/nodes, counts)
		}
	}
}

// The app's priority ranks first; the hash orders equal priorities.
func TestSpreadRank(t *testing.T) {
	if SpreadRank("e", 1, 1) <= SpreadRank("e", 2, 0) || SpreadRank("e", 1, -1) >= SpreadRank("e", 2, 0) {
		t.Error("a higher priority does not outrank a lower one whatever the hash")
	}
	if (SpreadRank("jobs", 1, 0) > SpreadRank("jobs", 2, 0)) != (SpreadHash("jobs", 1) > SpreadHash("jobs", 2)) {
		t.Error("equal priorities are not ordered by the hash")
	}
	if SpreadRank("e", 1, math.MinInt32)>>32 != math.MinInt32 || SpreadRank("e", 1, math.MaxInt32)>>32 != math.MaxInt32 {
		t.Error("the priority does not survive in the rank's high half")
	}
	for _, p := range []int64{math.MaxInt32 + 1, math.MinInt32 - 1} {
		if CheckSpreadPriority(p) == nil {
			t.Errorf("priority %d accepted; it does not fit the rank", p)
		}
	}
}

func TestImbalanced(t *testing.T) {
	for _, tc := range []struct {
		counts map[election.NodeID]int
		want   bool
	}{
		{map[election.NodeID]int{1: 250, 2: 250, 3: 250, 4: 250, 5: 0}, true},
		{map[election.NodeID]int{1: 210, 2: 191}, false}, // 1.099
		{map[election.NodeID]int{1: 211, 2: 191}, true},  // 1.105
		{map[election.NodeID]int{1: 1, 2: 1, 3: 1, 4: 0, 5: 0}, false},
		{map[election.NodeID]int{1: 2, 2: 0}, true},
		{map[election.NodeID]int{1: 7}, false},
	} {
		if got := Imbalanced(tc.counts, 0.1); got != tc.want {
			t.Errorf("Imbalanced(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

// Every giver's part of the plan together moves each node to its even
// share, no receiver is filled twice, and no leadership moves that the
// even split does not need.
func TestRebalancePlan(t *testing.T) {
	for _, counts := range []map[election.NodeID]int{
		{1: 250, 2: 250, 3: 251, 4: 249, 5: 0},
		{1: 1000, 2: 0, 3: 0, 4: 0, 5: 0},
		{1: 7, 2: 3, 3: 1},
		{1: 5, 2: 5},
	} {
		after := map[election.NodeID]int{}
		total, moved := 0, 0
		for id, k := range counts {
			after[id] += k
			total += k
		}
		for giver := range counts {
			for _, mv := range RebalancePlan(counts, giver) {
				after[giver] -= mv.Count
				after[mv.To] += mv.Count
				moved += mv.Count
			}
		}
		least := 0
		for _, k := range counts {
			least += max(0, k-(total+len(counts)-1)/len(counts))
		}
		for id, k := range after {
			if k < total/len(counts) || k > (total+len(counts)-1)/len(counts) {
				t.Errorf("%v: node %d ends with %d, not an even share: %v", counts, id, k, after)
			}
		}
		if moved != least {
			t.Errorf("%v: the plan moves %d, the even split needs %d", counts, moved, least)
		}
	}
}
