package named

import (
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
