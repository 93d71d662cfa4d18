package named

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/electord/electord/election"
)

// A node's digest of a peer's candidacies equals the peer's own digest of
// what it stands for exactly when the two sets are the same, whatever the
// order they were added in; every field of a candidacy counts.
func TestDigestOfCandidacies(t *testing.T) {
	own := func(ss map[string]Stand) uint64 {
		var d Digest
		for name, s := range ss {
			d.Add(name, s)
		}
		return d.Sum()
	}
	base := map[string]Stand{
		"a": {Priority: 1, Value: "app-1:8080"},
		"b": {Value: "x", LeaderTerm: election.NextTerm(0, 2), LeaderSince: 17},
	}
	var tb Table
	tb.Set("b", 2, base["b"])
	tb.Set("a", 2, base["a"])
	tb.Set("a", 3, Stand{Value: "other node"})
	got := tb.Digests()
	if got[2] != own(base) {
		t.Fatalf("the table's digest of node 2 %x, node 2's own %x: want equal", got[2], own(base))
	}
	if got[3] == got[2] || got[3] == 0 {
		t.Fatalf("node 3's digest %x (node 2's %x): want another, not 0", got[3], got[2])
	}
	if (Digest{}).Sum() == 0 {
		t.Fatal("the empty set's digest is 0, which says nothing")
	}
	for what, change := range map[string]func(map[string]Stand){
		"a withdrawal":   func(ss map[string]Stand) { delete(ss, "b") },
		"another value":  func(ss map[string]Stand) { ss["a"] = Stand{Priority: 1, Value: "app-1:8081"} },
		"a priority":     func(ss map[string]Stand) { ss["a"] = Stand{Priority: 2, Value: "app-1:8080"} },
		"a leadership":   func(ss map[string]Stand) { ss["a"] = Stand{Priority: 1, Value: "app-1:8080", LeaderTerm: 5} },
		"since":          func(ss map[string]Stand) { b := ss["b"]; b.LeaderSince++; ss["b"] = b },
		"a new election": func(ss map[string]Stand) { ss["c"] = Stand{} },
		"a value moved":  func(ss map[string]Stand) { ss["a"] = Stand{Priority: 1, Value: "app-1:808"}; ss["a0"] = Stand{} },
	} {
		ss := map[string]Stand{"a": base["a"], "b": base["b"]}
		change(ss)
		if own(ss) == got[2] {
			t.Errorf("%s leaves the digest unchanged", what)
		}
	}
}

// The digests the table keeps as it changes are the digests of what it
// holds, after any sequence of candidacies set, changed, withdrawn,
// forgotten and voided by a restart.
func TestTableKeepsItsDigests(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 17))
	var tb Table
	walked := func() map[election.NodeID]uint64 {
		out := map[election.NodeID]uint64{}
		for id, d := range walkDigests(&tb) {
			out[id] = d.Sum()
		}
		return out
	}
	incarnation := map[election.NodeID]uint64{}
	for step := range 5000 {
		node, name := election.NodeID(1+rng.IntN(5)), fmt.Sprintf("e%d", rng.IntN(20))
		var what string
		switch k := rng.IntN(20); {
		case k < 13:
			what = "set"
			tb.Set(name, node, Stand{Priority: int64(rng.IntN(3)), Value: fmt.Sprint(rng.IntN(4)),
				LeaderTerm: election.Term(rng.IntN(3)), LeaderSince: int64(rng.IntN(2))})
		case k < 18:
			what = "withdraw"
			tb.Withdraw(name, node)
		case k < 19:
			what = "forget"
			tb.Forget(node)
		default:
			what = "restart"
			incarnation[node]++
			tb.Renew(node, incarnation[node])
		}
		if got, want := tb.Digests(), walked(); !maps.Equal(got, want) {
			t.Fatalf("step %d (%s of node %d in %s): the table's digests %v, of what it holds %v", step, what, node, name, got, want)
		}
	}
	if len(tb.sums) > 5 {
		t.Fatalf("the table keeps %d digests for 5 nodes", len(tb.sums))
	}
}

// A period's digests with 10,000 elections of four other candidates each,
// as the table keeps them (Digests) and as walking it computes them (what
// Digests did before the table kept them).
func BenchmarkTableDigests10k(b *testing.B) {
	var tb Table
	for i := range 10000 {
		for node := election.NodeID(1); node <= 4; node++ {
			tb.Set(fmt.Sprintf("shard-%05d", i), node, Stand{Priority: 1, Value: "app-1:8080"})
		}
	}
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			tb.Digests()
		}
	})
	b.Run("walked", func(b *testing.B) {
		for b.Loop() {
			walkDigests(&tb)
		}
	})
}

// walkDigests computes each node's digest from what tb holds, in one pass.
func walkDigests(tb *Table) map[election.NodeID]*Digest {
	ds := map[election.NodeID]*Digest{}
	for name, ss := range tb.stands {
		for _, s := range ss {
			if ds[s.node] == nil {
				ds[s.node] = &Digest{}
			}
			ds[s.node].Add(name, s.Stand)
		}
	}
	return ds
}
